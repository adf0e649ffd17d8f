/** One status line on stderr for long runs (benchmarks, model load, decoding), rewritten in place on a terminal. */
export class Progress {
  private last = 0;
  private lastDecile = -1;
  constructor(private readonly out: NodeJS.WriteStream = process.stderr) {}

  tick(label: string, done: number, total: number): void {
    const t = Date.now();
    if (t - this.last < 200 && done < total) return;
    this.last = t;
    const width = 30;
    const filled = Math.round((done / Math.max(1, total)) * width);
    const line = `${label.padEnd(16)} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total}`;
    if (this.out.isTTY) {
      this.out.write(`\r${line}`);
      return;
    }
    // Logs get a line per tenth, so a failure can be placed.
    const decile = Math.floor((10 * done) / Math.max(1, total));
    if (decile !== this.lastDecile) {
      this.lastDecile = decile;
      this.out.write(`${line}\n`);
    }
  }

  done(): void {
    if (this.out.isTTY) this.out.write('\n');
  }
}
