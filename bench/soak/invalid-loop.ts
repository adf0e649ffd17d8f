/**
 * Random invalid configs and step arguments against one open session (loopback, so a config's
 * transports are opened for real). Each must be refused with an error naming what was wrong;
 * after each the session must be as it was (its config and positions unchanged), and every
 * VALID_EVERY cases a valid teacher-forced step must give the reference window's token. A
 * refused `Session.open` must leave no worker running.
 */
import type { Progress } from '../../src/cli/progress.js';
import type { BackendKind } from '../../src/runtime/device-api.js';
import { presetByName } from '../../src/decode/model-config.js';
import { liveWorkers } from '../../src/workers/worker-handle.js';
import type { Deadline } from './budget.js';
import { finish, noneWrong, resourceChecks, rssNote, type LoopResult } from './loop-result.js';
import { invalidCase } from './invalid-inputs.js';
import { stepChecked, type Reference } from './reference.js';
import { closingSnapshot, deviceBase, snapshot } from './resources.js';
import { openVariant, variantName, type Variant } from './variants.js';

const VALID_EVERY = 50;

export interface InvalidSpec {
  backend: BackendKind;
  preset: string;
  variant: Variant;
  cases: number;
  machine: string;
}

export async function invalidInputs(
  spec: InvalidSpec,
  ref: Reference,
  deadline: Deadline,
  progress: Progress,
): Promise<LoopResult> {
  const t0 = performance.now();
  const model = presetByName(spec.preset);
  const start = snapshot(await deviceBase(spec.backend));
  const notes: string[] = [];
  const fail = { unnamed: 0, accepted: 0, changed: 0, leaked: 0, validWrong: 0, valid: 0 };
  const say = (text: string): void => {
    if (notes.length < 12) notes.push(text);
  };
  let ran = 0,
    error: string | undefined;
  const s = await openVariant(spec.backend, spec.preset, spec.variant);
  try {
    for (; ran < spec.cases && !deadline.expired; ran++) {
      const c = invalidCase(spec.backend, spec.preset, model, 1);
      const before = JSON.stringify({ config: s.decodeConfig, at: s.position(0) });
      const workers = liveWorkers();
      let refusal: Error | undefined;
      try {
        await c.run(s);
      } catch (e) {
        refusal = e as Error;
      }
      if (!refusal) {
        fail.accepted++;
        say(`accepted: ${c.what}`);
      } else if (!c.names.test(refusal.message)) {
        fail.unnamed++;
        say(`refused without the name ${c.names}: ${c.what}: ${refusal.message}`);
      }
      if (JSON.stringify({ config: s.decodeConfig, at: s.position(0) }) !== before) {
        fail.changed++;
        say(`the session changed: ${c.what}`);
      }
      if (liveWorkers() !== workers) {
        fail.leaked++;
        say(`a worker was left running: ${c.what}`);
      }
      if ((ran + 1) % VALID_EVERY === 0) {
        if (s.position(0) === ref.maxPos) s.reset();
        fail.valid++;
        if (!(await stepChecked(s, ref)).ok) fail.validWrong++;
      }
      progress.tick('soak invalid input', ran + 1, spec.cases);
    }
    if (s.position(0) === ref.maxPos) s.reset();
    fail.valid++;
    if (!(await stepChecked(s, ref)).ok) fail.validWrong++;
  } catch (e) {
    error = `case ${ran}: ${(e as Error).message}`;
  } finally {
    await s.close();
  }
  const end = await closingSnapshot(await deviceBase(spec.backend).catch(() => NaN), start.threads);
  const refused = ran - fail.accepted;
  return finish({
    loop: 'invalid input',
    variant: variantName(spec.variant),
    machine: spec.machine,
    loopback: spec.variant.loopback,
    preset: spec.preset,
    unit: 'inputs',
    asked: spec.cases,
    ran,
    ...(error ? { cut: 'an error', error } : ran < spec.cases ? { cut: deadline.why } : {}),
    seconds: (performance.now() - t0) / 1000,
    start,
    end,
    checks: [
      {
        name: 'refused by name',
        value: `${refused - fail.unnamed} of ${ran}`,
        limit: 'every one, naming what was wrong',
        pass: ran > 0 && fail.accepted === 0 && fail.unnamed === 0,
      },
      noneWrong('session unchanged', fail.changed, ran, 'refusals'),
      noneWrong('nothing left open', fail.leaked, ran, 'refusals'),
      noneWrong('still decodes', fail.validWrong, fail.valid, `valid steps (one every ${VALID_EVERY})`),
      ...resourceChecks(start, end),
    ],
    notes: [...notes, rssNote(start, end)],
  });
}
