/**
 * The join profiler's marks on one ring (workers/profile-board.ts): events the worker records on
 * its stream just before a record runs, carried by the records the walk writes anyway instead of
 * records of their own. The ring knows them only as its annex (RingAnnex in workers/ring.ts).
 */
import type { EventHandle } from '../runtime/binding.js';
import { FLAG_MARKS, MARKS_PER_RECORD } from '../workers/profile-board.js';
import { RingError, type RingAnnex, type RingProducer } from '../workers/ring.js';

export class RingMarks implements RingAnnex {
  /** A plain field, not a getter: the ring reads it at every record. */
  pending = false;
  private marks: Float64Array | undefined;
  /** The events waiting for the next record (0: none). */
  private mark0 = 0;
  private mark1 = 0;

  /** Marks into `marks` (a ProfileBoard's, sized for this ring) from the ring's next record on. */
  constructor(
    private readonly ring: RingProducer,
    marks: Float64Array,
  ) {
    if (marks.length !== MARKS_PER_RECORD * ring.view.capacity)
      throw new RingError(
        `${ring.view.name}: a marks board of ${marks.length} words for a ring of ${ring.view.capacity} records`,
        'ERR_RING_MISUSE',
      );
    this.marks = marks;
    ring.attach(this);
  }

  /**
   * Have the worker record `event` on its stream just before the next record runs. False when two
   * marks already wait: the caller records this one with a record of its own.
   */
  mark(event: EventHandle): boolean {
    if (!this.marks)
      throw new RingError(`${this.ring.view.name}: mark() with no profile board attached`, 'ERR_RING_MISUSE');
    if (this.mark0 === 0) this.mark0 = event;
    else if (this.mark1 === 0) this.mark1 = event;
    else return false;
    this.pending = true;
    return true;
  }

  take(slot: number): number {
    this.marks![2 * slot] = this.mark0;
    this.marks![2 * slot + 1] = this.mark1;
    this.mark0 = this.mark1 = 0;
    this.pending = false;
    return FLAG_MARKS;
  }

  /** Stop marking; marks not yet carried are dropped. */
  detach(): void {
    this.ring.attach(undefined);
    this.marks = undefined;
    this.mark0 = this.mark1 = 0;
    this.pending = false;
  }
}
