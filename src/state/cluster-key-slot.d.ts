/** Types for `cluster-key-slot` (the CRC16 hash slot of a key, as ioredis and Redis Cluster compute it). */
declare module 'cluster-key-slot' {
  /** The hash slot (0–16383) of a key, honouring `{hash tags}`. */
  export default function calculateSlot(key: string | Buffer): number;
}
