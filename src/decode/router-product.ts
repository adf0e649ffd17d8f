/**
 * The router's product: b = rmsnorm(h, g2), then b @ Wr. Its sum is cut over 8 blocks a column
 * (ROUTER_SPLIT): the router has few columns, so one cluster of 8 spreads it over 8 SMs (bench:
 * 3.8 us against 6.2 at memra_gemv's default of two, scripts/probes/gemv-sweep.cu). The split
 * fixes the sum's order: every rank that routes uses this one, as the unsharded walk does. Up to
 * NORM_GEMV_MAX_COLS experts (one column tile of that product) and NORM_GEMV_MAX_ROWS rows the
 * norm runs in the product's launch (cu/model.h memra_norm_gemv); otherwise the two launches, with
 * the same bits.
 */
export const ROUTER_SPLIT = 8;
export const NORM_GEMV_MAX_COLS = 64;
/**
 * The rows up to which the walk takes the one launch. Its cluster norms four rows a round, so at t
 * = 8 two rounds one after the other, where memra_rmsnorm takes every row at once on a block of
 * its own (the likely cost). On one H200
 * (`bash scripts/gpu-session.sh ab-roofline`, three rounds against the same walk in two launches),
 * the step graph at t = 1 4.44-4.45 -> 4.41 ms, eagerly 4.59 -> 4.53-4.54, t = 2 and 4 unchanged,
 * t = 8 13.12-13.13 -> 13.18-13.20: so past four rows, two launches.
 */
export const NORM_GEMV_MAX_ROWS = 4;
