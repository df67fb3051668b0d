// Preloaded into HTTP test servers: binds every listen() to 127.0.0.1 and reports the real port on
// stderr, so tests can use port 0 and never expose a server beyond this machine.
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" || (typeof args[0] === "string" && /^\d+$/.test(args[0]))) {
    const port = Number(args[0]);
    const callback = args.find((arg) => typeof arg === "function");
    this.once("listening", () => process.stderr.write(`CODECELL_TEST_PORT=${this.address().port}\n`));
    return listen.call(this, port, "127.0.0.1", callback);
  }
  return listen.apply(this, args);
};
