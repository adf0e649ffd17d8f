/**
 * Builds a Profile from a decode run's steps as they come back (Session.stepDetailed's output),
 * numbering the steps in run order. Holds only what the exporters need: no device handles.
 */
import type { JoinTiming } from '../decode/join-profile.js';
import type { StepResult } from '../decode/device-walk.js';
import type { JoinSample, Profile, ProfileMeta, StepSample } from './profile-data.js';

export class ProfileRecorder {
  private readonly steps: StepSample[] = [];
  /** Each step's joins, read while later steps run (join-profile.ts). */
  private readonly reads: Array<Promise<JoinSample[]>> = [];

  /** One step of `rows` tokens; its joins when the config profiled it. */
  record(rows: number, out: { timing: StepResult['timing']; joins?: Promise<JoinTiming[]> }): void {
    const step = this.steps.length;
    this.steps.push({
      step,
      rows,
      hostStartMs: out.timing.hostStartMs,
      hostEnqueueUs: out.timing.hostEnqueueUs,
      wallUs: out.timing.wallUs,
    });
    if (!out.joins) return;
    const read = out.joins.then((js) => js.map((j) => ({ step, ...j })));
    read.catch(() => undefined); // seen by finish(); never an unhandled rejection before it
    this.reads.push(read);
  }

  get stepCount(): number {
    return this.steps.length;
  }

  async finish(meta: ProfileMeta, epGraph?: Profile['epGraph']): Promise<Profile> {
    const p: Profile = { meta, steps: [...this.steps], joins: (await Promise.all(this.reads)).flat() };
    if (epGraph) p.epGraph = epGraph;
    return p;
  }
}
