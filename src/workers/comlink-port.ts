/**
 * comlink over a worker_threads MessagePort. comlink ships its Node adapter as UMD only; loading
 * it through `require` keeps its real export (the function) instead of a default-import wrapper.
 */
import { createRequire } from 'node:module';
import type { MessagePort } from 'node:worker_threads';
import type { Endpoint } from 'comlink';

const nodeEndpoint = createRequire(import.meta.url)('comlink/dist/umd/node-adapter.js') as (
  port: MessagePort,
) => Endpoint;

export function portEndpoint(port: MessagePort): Endpoint {
  return nodeEndpoint(port);
}
