// The LL server through the whole runtime, step by step with short bounds, so a hang shows where it
// is: each case's time, the refusal words and the server's counters (run from the project root
// after the build: node scripts/probes/ll-server-node.mjs).
import { Runtime } from '../../dist/src/runtime/runtime.js';
import { ArLink } from '../../dist/src/runtime/link.js';
import { openTransport } from '../../dist/src/runtime/transports/open.js';
import { runCase } from '../../dist/test/support/transport-battery.js';

const rt = await Runtime.open({ backend: 'cuda', handshakeTimeoutMs: 3000 });
const link = await ArLink.open(rt);
await link.reserve(1 << 20);
await link.setSpinLimit(2e8); // ~0.1 s: a mismatched epoch refuses fast instead of hanging
const t = await openTransport('ll', link);
const cases = [];
const idle = Number(process.env.MEMRA_LL_SERVE_IDLE_US ?? 1000);
for (const serve of [idle, 0, idle, 0, idle])
  for (const op of ['broadcast', 'allReduce', 'allGather', 'gather']) cases.push({ serve, op });
let failed = false;
for (const { serve, op } of cases) {
  const t0 = performance.now();
  try {
    await link.setLlServe(serve);
    const rows = op === 'allGather' || op === 'gather' ? 2 : 1;
    await Promise.race([
      runCase(rt, t, { op, n: 1000, rows, inPlace: false, ops: 6 }),
      new Promise((_, no) => setTimeout(() => no(new Error('case timed out after 8 s')), 8000)),
    ]);
    console.log(
      `${serve ? 'served  ' : 'launched'} ${op}: ok in ${(performance.now() - t0).toFixed(1)} ms; errors ${await link.barrierErrors()}; stats ${JSON.stringify(await link.llServeStats())}`,
    );
  } catch (e) {
    failed = true;
    console.log(
      `${serve ? 'served  ' : 'launched'} ${op}: FAILED after ${(performance.now() - t0).toFixed(1)} ms: ${e.message}`,
    );
    for (const f of rt.faults) console.log(`  fault: ${f.message}`);
    // Control calls still answer while a rank's stream is stuck: issued against done says whether
    // the grid ran the jobs (then the stream's wait is what hangs) or never saw them.
    for (const [i, r] of rt.ranks.entries())
      console.log(`  rank ${i}: ${JSON.stringify(await r.control.call('llServeStats'))}`);
    break;
  }
}
console.log(failed ? 'FAIL' : 'ok');
// A stuck job keeps the grid running, and the addon's teardown waits for it: leave without it.
process.reallyExit(failed ? 1 : 0);
