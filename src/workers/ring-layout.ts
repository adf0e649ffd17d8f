/**
 * The command ring's shared-memory layout. One SharedArrayBuffer per (main thread -> worker)
 * direction; the main thread is always the producer and the device worker always the consumer,
 * and the roles never swap.
 *
 * Header: 1024 bytes, one field group per 128-byte block. Each counter gets a block of its own
 * so that the producer's stores and the consumer's stores never share a cache line (128 rather
 * than 64 because x86's adjacent-line prefetcher fetches lines in pairs).
 *
 * | byte | i32 word | field           | written by | meaning                                   |
 * |------|----------|-----------------|------------|-------------------------------------------|
 * |    0 |        0 | magic           | creator    | 0x474e524d ('MRNG')                        |
 * |    4 |        1 | version         | creator    | LAYOUT_VERSION                             |
 * |    8 |        2 | capacity        | creator    | records, a power of two                    |
 * |   12 |        3 | recordBytes     | creator    | RECORD_BYTES                               |
 * |  128 |       32 | head            | producer   | records published (u32, wraps)             |
 * |  256 |       64 | tail            | consumer   | records enqueued on the device (u32, wraps): "enqueued up to N" |
 * |  384 |       96 | consumerSleeping| consumer   | 1 while the consumer sleeps on `doorbell`  |
 * |  448 |      112 | doorbell        | main thread| bumped by a publish that finds the consumer asleep, and by every control call |
 * |  512 |      128 | tailWaiters     | any waiter | threads sleeping on `tail` (the producer when full, the peer worker in a handshake) |
 * |  640 |      160 | state           | consumer   | RingState                                  |
 * |  644 |      161 | faultSeq        | consumer   | sequence number of the refused record      |
 * |  648 |      162 | faultOp         | consumer   | its op code                                 |
 * |  652 |      163 | faultTextBytes  | consumer   | length of faultText in bytes                |
 * |  768 |      192 | faultText       | consumer   | the refusal's reason, UTF-8, at most 256 bytes, cut at a character boundary |
 * | 1024 |      256 | records         | producer   | capacity x RECORD_BYTES                     |
 *
 * Sequence numbers: the k-th record ever published has seq k (mod 2^32), so `head` is the seq of
 * the newest published record and `tail` the seq of the newest enqueued one. Counters are
 * compared by wrapping difference, `(a - b) | 0`, which is exact while the ring holds fewer than
 * 2^31 records.
 *
 * Record (RECORD_BYTES = 128, read as 32 i32 words or 16 f64 words):
 *
 * | i32 word | f64 word | field     | meaning                                                 |
 * |----------|----------|-----------|---------------------------------------------------------|
 * |        0 |          | op        | an `Op` code                                            |
 * |        1 |          | seq       | this record's sequence number (checked by the consumer) |
 * |        2 |          | afterPeer | enqueue only once the PEER ring's tail has reached it   |
 * |        3 |          | flags     | bit 0: afterPeer is set; bits 1 and up: the producer's annex's (RingAnnex in ring.ts; the profile board's FLAG_MARKS) |
 * |          |   2 .. 15| args      | 14 numeric arguments (pointers, handles, sizes)          |
 */
export const RING_MAGIC = 0x474e524d;
export const LAYOUT_VERSION = 1;
export const HEADER_BYTES = 1024;
export const RECORD_BYTES = 128;
export const RECORD_I32 = RECORD_BYTES / 4;
export const RECORD_F64 = RECORD_BYTES / 8;
export const RECORD_ARGS = RECORD_F64 - 2;

export const W_MAGIC = 0;
export const W_VERSION = 1;
export const W_CAPACITY = 2;
export const W_RECORD_BYTES = 3;
export const W_HEAD = 32;
export const W_TAIL = 64;
export const W_CONSUMER_SLEEPING = 96;
export const W_DOORBELL = 112;
export const W_TAIL_WAITERS = 128;
export const W_STATE = 160;
export const W_FAULT_SEQ = 161;
export const W_FAULT_OP = 162;
export const W_FAULT_TEXT_BYTES = 163;
/** The refusal's reason lives in the header so the producer can name it synchronously, without
 *  waiting for the worker's fault message to arrive through the event loop. */
export const FAULT_TEXT_OFFSET = 768;
export const FAULT_TEXT_MAX = 256;

export const R_OP = 0;
export const R_SEQ = 1;
export const R_AFTER_PEER = 2;
export const R_FLAGS = 3;
export const R_ARG0_F64 = 2;
export const FLAG_AFTER_PEER = 1;

export enum RingState {
  Running = 0,
  /** The consumer refused a record; `faultSeq` and `faultOp` say which. Nothing after it runs. */
  Faulted = 1,
  /** The consumer has stopped (closed or its thread exited). */
  Stopped = 2,
}

/** Wrapping distance `a - b` between two u32 counters. */
export function seqDiff(a: number, b: number): number {
  return (a - b) | 0;
}

export function ringBytes(capacity: number): number {
  return HEADER_BYTES + capacity * RECORD_BYTES;
}

export function isPowerOfTwo(n: number): boolean {
  return Number.isInteger(n) && n > 0 && (n & (n - 1)) === 0;
}
