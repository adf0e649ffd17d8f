/**
 * The soak's time limit, shared out: each loop, when it starts, gets an equal share of what is
 * left, so a loop that finishes early leaves its time to the ones after it and none can starve
 * the rest. A loop checks its deadline between iterations and stops there, recording how many
 * it ran: no loop claims a count it did not run.
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
  constructor(
    totalSeconds: number,
    private loopsLeft: number,
  ) {
    this.end = performance.now() + totalSeconds * 1000;
  }

  /** The next loop's deadline: an equal share of the time left. */
  next(): Deadline {
    const left = Math.max(0, (this.end - performance.now()) / 1000);
    const share = left / Math.max(1, this.loopsLeft);
    this.loopsLeft = Math.max(0, this.loopsLeft - 1);
    return new Deadline(share);
  }
}
