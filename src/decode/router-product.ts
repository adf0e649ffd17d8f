/**
 * The router's product: b = rmsnorm(h, g2), then b @ Wr. Its sum is cut over 8 blocks a column
 * (ROUTER_SPLIT): the router has few columns, so one cluster of 8 spreads it over 8 SMs (bench:
 * 3.8 us against 6.2 at memra_gemv's default of two, scripts/probes/gemv-sweep.cu). The split
 * fixes the sum's order: every rank that routes uses this one, as the unsharded walk does. Up to
 * NORM_GEMV_MAX_COLS experts (one column tile of that product) the norm runs in the product's
 * launch (cu/model.h memra_norm_gemv), at every t: on one H200 (`bash scripts/gpu-session.sh
 * ab-roofline`, three rounds) the step graph at t = 8 12.16 ms with the two launches against
 * 12.08-12.10 with the one; otherwise the two launches, with the same bits.
 */
export const ROUTER_SPLIT = 8;
export const NORM_GEMV_MAX_COLS = 64;
