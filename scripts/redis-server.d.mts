export declare const REDIS_SERVER: string;
export declare const hasRedis: boolean;
export declare const redisRequired: boolean;
export declare const redisSkipReason: string | null;
export declare function freePort(): Promise<number>;
export type RunningRedis = {
  port: number;
  url: string;
  /** Kills the server (SIGKILL) and starts it again on the same port: empty unless persistence is on. */
  restart(): Promise<void>;
  /** Kills the server (SIGKILL); `start` or `restart` brings it back. */
  halt(): Promise<void>;
  /** Starts the server again after `halt`. */
  start(): Promise<void>;
  /** Deletes what it persisted (while halted): the next start comes back empty. */
  wipe(): void;
  /** Sends one command and resolves with the first line of the reply. */
  command(...args: Array<string | number>): Promise<string>;
  /** The server's process id, or null while it is halted. */
  pid(): number | null;
  stop(): Promise<void>;
};
export declare function startRedisServer(options?: {
  /** "aof": an append-only file fsynced on every write; default none. */
  persistence?: "none" | "aof";
  /** More server arguments, e.g. ["--replicaof", "127.0.0.1", "6380"]. */
  args?: string[];
}): Promise<RunningRedis>;
export type RunningSentinel = {
  port: number;
  /** What the sentinel has logged so far. */
  log(): string;
  /** The port of the master the sentinel names now. */
  masterPort(): Promise<number>;
  stop(): Promise<void>;
};
export declare function startRedisSentinel(options: {
  masterPort: number;
  name: string;
  downAfterMs?: number;
  failoverTimeoutMs?: number;
}): Promise<RunningSentinel>;
