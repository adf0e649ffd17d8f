/**
 * The device barriers' refusal words, read back with every step whose joins wait on the device
 * (`oneshot`, `ll`). A join whose other half never runs stores REFUSED_ENTRY (40043) or
 * REFUSED_EXIT (40044, runtime/link-constants.ts) into its rank's word and returns instead of
 * hanging, so its step completes with wrong numbers. Each rank therefore copies its word into its
 * mailbox after its last join of the step (rank 0 before its step signal, rank 1 then advancing
 * REFUSAL_SLOT), and the step hands back its tokens only when both words read 0. The copies are
 * one 4-byte record per rank and a signal on rank 1; the read is two loads from mapped host
 * memory. A refusal also says when each rank issued the step's joins (workers/join-log.ts): a half
 * issued late is the host's delay, halves issued together the device's.
 */
import { MemraError } from '../api/errors.js';
import type { ArLink } from '../runtime/link.js';
import { REFUSED_ENTRY, REFUSED_EXIT } from '../runtime/link-constants.js';
import { describeJoinHalves } from '../workers/join-log.js';
import type { Runtime } from '../runtime/runtime.js';
import type { Transport } from '../runtime/transports/transport.js';
import type { ModelOps } from './model-ops.js';

/** Rank 1's completion counter for its word's copy (slot 0 counts rank 0's steps, 1 the profile's stamps). */
export const REFUSAL_SLOT = 2;
/** Mailbox bytes the word takes on each rank. */
export const REFUSAL_BYTES = 8;

const MEANING: Record<number, string> = {
  [REFUSED_ENTRY]: "waited out its spin bound for the other rank's half (one-shot entry, or LL data)",
  [REFUSED_EXIT]: 'waited out its spin bound at the one-shot exit, or for an LL acknowledgment',
};

/** A step failed because a device barrier refused; the session resets the barrier and stays usable. */
export class BarrierRefusal extends MemraError<'ERR_BARRIER_REFUSED'> {
  constructor(
    /** Each rank's refusal word: 0, REFUSED_ENTRY or REFUSED_EXIT. */
    readonly words: readonly number[],
    /** The spin bound the joins waited, SM clock ticks (config `spin.deviceTicks`). */
    readonly spinTicks: number,
    /** What became of the session, said after the cause. */
    outcome = "this step's tokens are wrong and were not returned",
    /** When each rank issued the step's joins that wait on the device (describeJoinHalves). */
    readonly halves?: string,
  ) {
    const refused = words.flatMap((w, r) => (w === 0 ? [] : [`rank ${r} ${w} (a join ${MEANING[w] ?? 'refused'})`]));
    super(
      `step: the device barrier refused on ${refused.join(' and ')}, after ${spinTicks} ticks (config ` +
        `spin.deviceTicks): one rank's half of a join never ran; ${outcome}` +
        (halves ? `. ${halves}` : ''),
      'ERR_BARRIER_REFUSED',
    );
  }

  /** The ranks whose joins refused. */
  get ranks(): number[] {
    return this.words.flatMap((w, r) => (w === 0 ? [] : [r]));
  }
}

/** Whether any of a step's joins wait at a device barrier. */
export function waitsOnDevice(trs: ReadonlyArray<Transport | undefined>): boolean {
  return trs.some((tr) => tr?.name === 'oneshot' || tr?.name === 'll');
}

export class BarrierWatch {
  private copies = 0;
  /**
   * The joins that wait on the device both ranks had issued when the last step checked here
   * ended, and the logs' realigns then (a count from before a realign is stale).
   */
  private joinsBefore = { count: 0, realigns: 0 };

  constructor(
    private readonly rt: Runtime,
    private readonly link: ArLink,
    /** Where in each rank's mailbox the word lands. */
    private readonly offset: number,
  ) {}

  /** After each rank's last join of the step, and before rank 0's step signal; returns the copy's number. */
  copy(ops: readonly ModelOps[]): number {
    const n = ++this.copies;
    ops[0]!.toMailbox(this.link.err[0], this.offset, 4);
    ops[1]!.toMailbox(this.link.err[1], this.offset, 4);
    ops[1]!.rank.signal(REFUSAL_SLOT, n);
    return n;
  }

  /** Once rank 0's step signal is seen: waits for rank 1's copy `n`, then throws on either word. */
  async check(n: number, timeoutMs: number): Promise<void> {
    await this.rt.waitCompleted(1, REFUSAL_SLOT, n, timeoutMs);
    // Rank 0's step signal and rank 1's copy follow every record of the step: its joins are logged.
    const logs = this.rt.joinLogs;
    const from = this.joinsBefore.realigns === logs[0]!.realigns ? this.joinsBefore.count : 0;
    this.joinsBefore = { count: Math.min(...logs.map((l) => l.count())), realigns: logs[0]!.realigns };
    const words = [0, 1].map((r) => {
      const box = this.rt.mailboxes[r]!;
      return new Int32Array(box.buffer, box.byteOffset + this.offset, 1)[0]!;
    });
    if (words.some((w) => w !== 0))
      throw new BarrierRefusal(
        words,
        this.link.spinLimit,
        undefined,
        describeJoinHalves(logs, from, "This step's joins that wait on the device"),
      );
  }
}
