/**
 * What each rank's stream is doing, in words, for a wait that timed out: whether the device is
 * still running the records a worker enqueued (a kernel that never finishes) or has finished them
 * (the counter's signal was never enqueued, or its record never came), or has failed. Each worker
 * answers from its idle loop (workers/stream-watch.ts); one that does not answer within REPORT_MS
 * is named as such, so the report itself cannot hang the error it explains. The same bound holds
 * for what else the runtime was told to add (its stall notes).
 */
import type { DeviceStop } from '../workers/device-progress.js';
import type { StreamState } from '../workers/stream-watch.js';
import type { WorkerHandle } from '../workers/worker-handle.js';

export const REPORT_MS = 2000;

/** Where the device stopped among the marked records (MEMRA_DEVICE_PROGRESS=1). */
function stopWords(stop: DeviceStop | undefined): string {
  if (!stop) return '';
  const { finished, pending, window } = stop;
  return finished
    ? `, and its device has finished record ${finished.seq} (${finished.op}) but not ${pending.seq} (${pending.op})`
    : `, and its device has finished none of its last ${window} records (the oldest ${pending.seq}, ${pending.op})`;
}

function describe(rank: number, s: StreamState | Error | undefined): string {
  if (s === undefined) return `rank ${rank}: no answer within ${REPORT_MS} ms`;
  if (s instanceof Error) return `rank ${rank}: ${s.message}`;
  const server = s.llServer
    ? ` (its LL server: ${Object.entries(s.llServer)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')})`
    : '';
  return s.busy
    ? `rank ${rank}: its stream is still running the records enqueued up to ${s.enqueued}, ${s.busyForMs} ms after the last${stopWords(s.stop)}${server}`
    : `rank ${rank}: its stream has finished every record enqueued (up to ${s.enqueued})${server}`;
}

/** What `ask` resolves to, its error, or undefined once REPORT_MS pass without either. */
async function answerWithin<T>(ask: () => Promise<T>): Promise<T | Error | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), REPORT_MS);
  });
  const answer = Promise.resolve()
    .then(ask)
    .catch((e: unknown) => (e instanceof Error ? e : new Error(String(e))));
  return Promise.race([answer, late]).finally(() => clearTimeout(timer));
}

export async function reportStreams(workers: readonly WorkerHandle[]): Promise<string> {
  const states = await Promise.all(workers.map((w) => answerWithin(() => w.call('streamState'))));
  return states.map((s, r) => describe(r, s)).join('; ');
}

/**
 * What the runtime's stall notes say (Runtime.addStallNote: a link's refusal words), each bounded
 * as a worker's answer is; '' when there are none.
 */
export async function reportStallNotes(notes: Iterable<() => Promise<string>>): Promise<string> {
  const said = await Promise.all([...notes].map((note) => answerWithin(note)));
  return said
    .map((s) =>
      s === undefined ? `a stall note gave no answer within ${REPORT_MS} ms` : s instanceof Error ? s.message : s,
    )
    .join('; ');
}
