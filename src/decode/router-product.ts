/**
 * The router's product: b = rmsnorm(h, g2), then b @ Wr. Its sum is cut over 8 blocks a column
 * (ROUTER_SPLIT): the router has few columns, so one cluster of 8 spreads it over 8 SMs (bench:
 * 3.8 us against 6.2 at memra_gemv's default of two, scripts/probes/gemv-sweep.cu). The split
 * fixes the sum's order: every rank that routes uses this one, as the unsharded walk does. Up to
 * NORM_GEMV_MAX_COLS experts (one column tile of that product) and NORM_GEMV_MAX_ROWS rows the
 * norm runs in the product's launch, every block of its cluster norming every row itself
 * (cu/model.h memra_norm_gemv); otherwise the two launches, with the same bits.
 */
export const ROUTER_SPLIT = 8;
export const NORM_GEMV_MAX_COLS = 64;
/**
 * The rows up to which the walk takes the one launch. Past four, each of the cluster's blocks
 * holds eight rows of the norm's elements (and spills), where memra_rmsnorm takes every row at
 * once on a block of its own. On one H200 (`bash scripts/gpu-session.sh ab-roofline`, three rounds
 * against the build that norms on the cluster, one launch up to four rows): the step graph at t =
 * 1 4.31 -> 4.24 ms, t = 2 6.26 -> 6.19, t = 4 8.96 -> 8.91, but with the one launch at t = 8
 * too, 12.22 -> 12.47 (the launch 18.6 -> 27 us a layer in the kernel table): so past four rows,
 * two launches.
 */
export const NORM_GEMV_MAX_ROWS = 4;
