/**
 * The soak's time limit, shared out: each loop, when it starts, gets a share of what is left in
 * proportion to what it is expected to take (its count times a measured cost an iteration,
 * run-soak.ts), so a loop that finishes early leaves its time to the ones after it, a long loop
 * is not cut to a short one's share while time remains, and none can starve the rest. A loop
 * checks its deadline between iterations and stops there, recording how many it ran: no loop
 * claims a count it did not run.
 */
export class Deadline {
  private readonly end: number;
  constructor(readonly seconds: number) {
    this.end = performance.now() + seconds * 1000;
  }
  get expired(): boolean {
    return performance.now() >= this.end;
  }
  /** Why a loop stopped short, for its result. */
  get why(): string {
    return `its share of the time limit (${this.seconds.toFixed(0)} s) ran out`;
  }
}

export class Budget {
  private readonly end: number;
  private asked = 0;
  /**
   * `expected[i]`: the seconds loop i should take, in the order the loops will ask; a limit at
   * least their sum lets each of them take all it needs.
   */
  constructor(
    totalSeconds: number,
    private readonly expected: readonly number[],
  ) {
    this.end = performance.now() + totalSeconds * 1000;
  }

  /** The next loop's deadline: its part of the time left, by its expected seconds against the rest's. */
  next(): Deadline {
    const left = Math.max(0, (this.end - performance.now()) / 1000);
    const rest = this.expected.slice(this.asked).reduce((a, b) => a + b, 0);
    const mine = this.expected[this.asked] ?? 0;
    this.asked++;
    return new Deadline(rest > 0 ? (left * mine) / rest : left);
  }
}
