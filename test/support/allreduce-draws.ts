/**
 * `wo: "allreduce"` against the unsharded walk, the bounds both sharded walks' GPU tests hold.
 *
 * The two partial sums round differently from the one sum, by about 1e-7, and docs/model.md's
 * e4m3 quantization of the MoE input amplifies that wherever an element sits on a rounding
 * boundary: it moves by 1/16 of itself, and once such a step has written the latent cache every
 * later step reads it. On `small` (4 layers) a flip is rare: a draw of start tokens has most steps
 * at 1e-7 and a median within 1e-5, but now and then the flip lands early and holds the median
 * above (decode.test.ts at t = 4 about one full GPU suite in six, 5e-4 from step 2 on, median
 * 6.3e-5; the replicated walk at t = 1, `decode-1xH200-2026-12-02-13`'s run, median 2.03e-5, and
 * again 1.48e-5 in a later suite). A systematic loss (a sum in lower precision) moves every step
 * of every draw, so `small` takes three independent draws and asks one to hold the median; every
 * step of every draw stays within 1e-2 (a wrong sum, a lost half of `wo`, is O(1)). On `bench`
 * (30 layers) the first flip feeds the next layers' quantization and the cache, and the error
 * settles near e4m3's own scale: one draw, its median within ten times the 5e-3 seen
 * (2026-11-30), and every step within 0.2, three times e4m3's step of 1/16. The worst of a draw's
 * steps spreads far more than its median (sixteen draws over six full GPU suites: medians 2e-3 to
 * 1.7e-2, worst steps 4e-3 to 5.5e-2), so a bound of 5e-2 on every step failed one draw of the
 * sixteen with no kernel changed.
 */
import { strict as assert } from 'node:assert';

/** How many draws a preset takes. */
export function allreduceDraws(preset: string): number {
  return preset === 'small' ? 3 : 1;
}

export function median(errs: readonly number[]): number {
  return [...errs].sort((x, y) => x - y)[errs.length >> 1]!;
}

/** Each draw's relative L2 by step, printed and held to the bounds above. */
export function checkAllreduceDraws(preset: string, label: string, draws: readonly (readonly number[])[]): void {
  for (const [d, errs] of draws.entries()) {
    const worst = Math.max(...errs),
      over = errs.filter((e) => e > 1e-5).length;
    console.log(
      `      ${label}: wo allreduce, draw ${d}: relative L2 median ${median(errs).toExponential(2)}, worst ${worst.toExponential(2)}, ${over} of ${errs.length} steps over 1e-5; by step: ${errs.map((e) => e.toExponential(1)).join(' ')}`,
    );
    const bound = preset === 'small' ? 1e-2 : 2e-1;
    assert.ok(
      worst <= bound,
      `${label}: wo allreduce, draw ${d}: a step at relative L2 ${worst.toExponential(2)} > ${bound}: beyond e4m3's rounding`,
    );
    if (preset !== 'small')
      assert.ok(
        median(errs) <= 5e-2,
        `${label}: wo allreduce, draw ${d}: median relative L2 ${median(errs).toExponential(2)} > 5e-2: beyond e4m3's rounding`,
      );
  }
  if (preset === 'small') {
    const best = Math.min(...draws.map(median));
    assert.ok(
      best <= 1e-5,
      `${label}: wo allreduce: median relative L2 above 1e-5 in all ${draws.length} draws (best ${best.toExponential(2)})`,
    );
  }
}
