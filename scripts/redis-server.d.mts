export declare const REDIS_SERVER: string;
export declare const hasRedis: boolean;
export declare const redisRequired: boolean;
export declare const redisSkipReason: string | null;
export declare function freePort(): Promise<number>;
export type RunningRedis = {
  port: number;
  url: string;
  /** Kills the server and starts an empty one on the same port. */
  restart(): Promise<void>;
  /** Kills the server (SIGKILL); `restart` brings an empty one back. */
  halt(): Promise<void>;
  stop(): Promise<void>;
};
export declare function startRedisServer(): Promise<RunningRedis>;
