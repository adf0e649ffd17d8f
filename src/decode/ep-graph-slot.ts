/**
 * The EP step's graph slot (`MatrixEpGraphSlot` of seed 003, the Rust engine's multi-device EP
 * graph; docs/architecture.md#terms): per MoE layer of one decode state,
 * Empty, Ready (a captured graph that replays the layer's EP step) or Refused.
 *
 * A refusal LATCHES: the layer goes on with the eager twin and is never captured again, because
 * a guard that failed once (a batched step, a mismatched partition) would fail on every token
 * and a capture attempt per token costs more than the eager step it replaces. Only a new config
 * (another transport, the gate switched) empties the slots, since it changes what a capture
 * would hold.
 *
 * The capture guards are the seed's, each refusal naming its reason: t must be 1 (the graph is
 * built for one row), the expert ownership must be the partition the workspaces were built for,
 * no validation mode may be on (validation reads intermediate state the graph does not expose),
 * and everything the capture needs must exist.
 */
export interface EpGraph {
  /** Replay the layer's EP step (one record on each ring it touches). */
  launch(): void;
  destroy(): Promise<void>;
}

export type EpSlot = { state: 'empty' } | { state: 'ready'; graph: EpGraph } | { state: 'refused'; reason: string };

/** What the guards look at, for one layer's first use. */
export interface EpCaptureContext {
  t: number;
  /** The experts each rank owns now, and the split the workspaces were built for. */
  ownership: ReadonlyArray<{ e0: number; nE: number }>;
  builtFor: ReadonlyArray<{ e0: number; nE: number }>;
  validation: boolean;
  /** Names of what the capture needs and does not have (empty when complete). */
  missing: readonly string[];
}

/** The first guard that refuses, or undefined when a capture may be attempted. */
export function epCaptureGuard(c: EpCaptureContext): string | undefined {
  if (c.t !== 1) return `the EP graph supports only t = 1 decode; this step has t = ${c.t}`;
  const same =
    c.ownership.length === c.builtFor.length &&
    c.ownership.every((o, r) => o.e0 === c.builtFor[r]!.e0 && o.nE === c.builtFor[r]!.nE);
  if (!same) {
    const show = (p: EpCaptureContext['ownership']): string =>
      p.map((o, r) => `rank ${r}: [${o.e0}, ${o.e0 + o.nE})`).join(', ');
    return `EP ownership mismatch: experts are split ${show(c.ownership)} but the workspaces were built for ${show(c.builtFor)}`;
  }
  if (c.validation)
    return 'the EP graph requires validation off (it does not expose the intermediate state validation reads)';
  if (c.missing.length > 0) return `the EP graph capture is missing ${c.missing.join(', ')}`;
  return undefined;
}

export class EpGraphSlots {
  private slots: EpSlot[];
  /** Graph launches so far (the seed's dispatch counter): layers × tokens when every slot is Ready. */
  dispatches = 0;
  /** Capture attempts so far: at most one per slot between config changes. */
  captures = 0;

  constructor(readonly layers: number) {
    this.slots = Array.from({ length: layers }, () => ({ state: 'empty' }) as EpSlot);
  }

  slot(l: number): EpSlot {
    return this.slots[l]!;
  }

  /**
   * Run layer l's EP step: launch its graph when Ready; when Empty, check the guards and either
   * capture (Ready) or latch the refusal; otherwise (Refused, or a capture that failed) run the
   * eager twin. Returns which path ran.
   */
  async run(
    l: number,
    ctx: () => EpCaptureContext,
    capture: () => Promise<EpGraph>,
    eager: () => void,
  ): Promise<'graph' | 'eager'> {
    let s = this.slots[l]!;
    if (s.state === 'empty') {
      const reason = epCaptureGuard(ctx());
      if (reason) s = this.slots[l] = { state: 'refused', reason };
      else {
        this.captures++;
        try {
          s = this.slots[l] = { state: 'ready', graph: await capture() };
        } catch (e) {
          s = this.slots[l] = { state: 'refused', reason: `capture failed: ${(e as Error).message}` };
        }
      }
    }
    if (s.state === 'ready') {
      s.graph.launch();
      this.dispatches++;
      return 'graph';
    }
    eager();
    return 'eager';
  }

  /** Every slot back to Empty (a new config); Ready graphs are destroyed. */
  async reset(): Promise<void> {
    const old = this.slots;
    this.slots = Array.from({ length: this.layers }, () => ({ state: 'empty' }) as EpSlot);
    for (const s of old) if (s.state === 'ready') await s.graph.destroy();
  }
}
