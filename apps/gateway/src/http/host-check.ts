/** Names that always mean this machine. */
const LOOPBACK_NAMES = new Set(["localhost", "127.0.0.1", "::1"]);

function bare(host: string): string {
  const lower = host.trim().toLowerCase();
  return lower.startsWith("[") && lower.endsWith("]") ? lower.slice(1, -1) : lower;
}

/** True for an address only this machine can reach: localhost, 127.0.0.0/8, ::1. */
export function isLoopbackHost(host: string): boolean {
  const name = bare(host);
  return LOOPBACK_NAMES.has(name) || /^127(\.\d{1,3}){3}$/.test(name) || name === "::ffff:127.0.0.1";
}

/** True for a bind on every interface. */
export function isWildcardHost(host: string): boolean {
  const name = bare(host);
  return name === "0.0.0.0" || name === "::" || name === "";
}

/** The host name of a `Host` header (`name:port`, `[v6]:port`), lowercased; null when malformed. */
export function hostHeaderName(header: string | undefined): string | null {
  if (!header) return null;
  const value = header.trim().toLowerCase();
  if (value.startsWith("[")) {
    const end = value.indexOf("]");
    return end > 0 ? value.slice(1, end) : null;
  }
  const colon = value.indexOf(":");
  const name = colon >= 0 ? value.slice(0, colon) : value;
  return name.length > 0 ? name : null;
}

/**
 * Which `Host` headers the gateway answers (DNS rebinding: a page on another site resolving its own
 * name to 127.0.0.1 sends its own name as Host). Accepted: the bound host, loopback names when bound to
 * loopback or all interfaces, and the configured allow list. A bind on all interfaces without an allow
 * list accepts any name (there, bearer tokens are required and guard every request).
 */
export class HostCheck {
  readonly #allowed: Set<string>;
  readonly #any: boolean;

  constructor(boundHost: string, allowedHosts: readonly string[]) {
    this.#allowed = new Set(allowedHosts.map(bare));
    const wildcard = isWildcardHost(boundHost);
    if (!wildcard) this.#allowed.add(bare(boundHost));
    if (wildcard || isLoopbackHost(boundHost)) for (const name of LOOPBACK_NAMES) this.#allowed.add(name);
    this.#any = wildcard && allowedHosts.length === 0;
  }

  allows(header: string | undefined): boolean {
    const name = hostHeaderName(header);
    if (name === null) return false;
    return this.#any || this.#allowed.has(name);
  }
}
