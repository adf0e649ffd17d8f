/**
 * A ring's profile board: what the join profiler asks of a worker around that ring's records,
 * asked without a ring record of its own. A profiled join used to cost four extra records (two
 * event records and a stamp on each ring); on a host-bound eager step those records were most of
 * profiling's cost, so the board rides on the records the walk writes anyway.
 *
 * One SharedArrayBuffer per ring, sized by the ring's capacity and indexed by ring slot
 * (seq & (capacity - 1)), so an entry lives exactly as long as the record in that slot:
 *
 * | f64 words                   | field  | written by | meaning                                         |
 * |-----------------------------|--------|------------|-------------------------------------------------|
 * | [0, 2·capacity)             | marks  | producer   | two event handles per slot (0: none), recorded on the stream just before the slot's record runs; only read when the record carries FLAG_MARKS |
 * | [2·capacity, 3·capacity)    | stamps | consumer   | host clock (µs, runtime/host-clock.ts) when the worker had enqueued the slot's record; written for every record while the board is set |
 *
 * The producer writes a slot's marks before it publishes the record (the publish's release store
 * orders them); the consumer writes a stamp after it enqueued the record and before it advances
 * `tail`, so a reader that has seen `tail` reach a seq also sees its stamp. A stamp is valid
 * until the ring wraps onto its slot again: readers check that it has not.
 */
export const MARKS_PER_RECORD = 2;
/** The record flag (ring-layout.ts, an annex's bit) that says its slot's marks are to be recorded. */
export const FLAG_MARKS = 2;

/** Whether a record with these flags carries marks: the worker records them before it runs. */
export function carriesMarks(flags: number): boolean {
  return (flags & FLAG_MARKS) !== 0;
}

export class ProfileBoard {
  readonly marks: Float64Array;
  readonly stamps: Float64Array;

  constructor(
    readonly buffer: SharedArrayBuffer,
    readonly capacity: number,
  ) {
    if (buffer.byteLength !== ProfileBoard.bytes(capacity)) {
      throw new Error(
        `profile board: ${buffer.byteLength} bytes, but a ring of ${capacity} records needs ${ProfileBoard.bytes(capacity)}`,
      );
    }
    this.marks = new Float64Array(buffer, 0, MARKS_PER_RECORD * capacity);
    this.stamps = new Float64Array(buffer, MARKS_PER_RECORD * capacity * 8, capacity);
  }

  static bytes(capacity: number): number {
    return (MARKS_PER_RECORD + 1) * capacity * 8;
  }

  static create(capacity: number): ProfileBoard {
    return new ProfileBoard(new SharedArrayBuffer(ProfileBoard.bytes(capacity)), capacity);
  }
}
