/**
 * Builds a Profile from a decode run's steps as they come back (Session.stepDetailed's output),
 * numbering the steps in run order. Holds only what the exporters need: no device handles.
 */
import type { JoinTiming } from '../decode/join-profile.js';
import type { StepResult } from '../decode/device-walk.js';
import type { JoinSample, Profile, ProfileMeta, StepSample } from './profile-data.js';

export class ProfileRecorder {
  private readonly steps: StepSample[] = [];
  private readonly joins: JoinSample[] = [];

  /** One step of `rows` tokens; its joins when the config profiled it. */
  record(rows: number, out: { timing: StepResult['timing']; joins?: JoinTiming[] }): void {
    const step = this.steps.length;
    this.steps.push({ step, rows, hostStartMs: out.timing.hostStartMs, hostEnqueueUs: out.timing.hostEnqueueUs, wallUs: out.timing.wallUs });
    for (const j of out.joins ?? []) this.joins.push({ step, ...j });
  }

  get stepCount(): number { return this.steps.length; }

  finish(meta: ProfileMeta, epGraph?: Profile['epGraph']): Profile {
    const p: Profile = { meta, steps: [...this.steps], joins: [...this.joins] };
    if (epGraph) p.epGraph = epGraph;
    return p;
  }
}
