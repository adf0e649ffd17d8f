/** Transport by name, over an open link. */
import type { ArLink } from '../link.js';
import { HostTransport } from './host.js';
import { MovementTransport, copyEngineMover, kernelMover } from './movement.js';
import { NcclTransport } from './nccl.js';
import { OneShotTransport } from './oneshot.js';
import { LlTransport } from './ll.js';
import { TRANSPORTS, type Transport, type TransportName } from './transport.js';

export async function openTransport(name: TransportName, link: ArLink): Promise<Transport> {
  switch (name) {
    case 'host':
      return new HostTransport(link);
    case 'peer':
      return new MovementTransport('peer', link, copyEngineMover);
    case 'push':
      return new MovementTransport('push', link, kernelMover);
    case 'oneshot':
      return new OneShotTransport(link);
    case 'll':
      return new LlTransport(link);
    case 'nccl':
      await link.openNccl();
      return new NcclTransport(link);
    default:
      throw new RangeError(`unknown transport '${String(name)}': choose one of ${TRANSPORTS.join(', ')}`);
  }
}
