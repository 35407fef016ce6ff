//! The egress policy (docs/SPEC.md §4.5): which host names and ports a
//! sandbox in egress mode may reach through odek's proxy, and which
//! addresses those names may resolve to. Pure functions, shared by odek
//! (which writes the policy and checks the proxy's echo of it) and the
//! proxy (which applies it).
//!
//! A rule is written `HOST`, `*.DOMAIN`, `HOST:PORT` or `*.DOMAIN:PORT`
//! ([`Rule::parse`]): a bare host allows ports 80 and 443; `*.DOMAIN`
//! matches every name below `DOMAIN` (not `DOMAIN` itself). Names are
//! compared in lower case without a trailing dot. Addresses are the other
//! half of the check ([`Policy::check_address`]): a name that resolves to
//! loopback, private, link-local, shared (CGNAT), metadata or otherwise
//! reserved ranges is refused even when listed, unless the address lies
//! inside one of the egress network's own subnets ([`Policy::outside`],
//! the network that stands for the outside) and is not its gateway.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The version of the policy's JSON form; the proxy refuses any other.
pub const POLICY_VERSION: u32 = 1;

/// The ports a bare host allows: plain HTTP and HTTPS.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// The port the proxy listens on in its container.
pub const PROXY_PORT: u16 = 3128;

/// The first word of every line the proxy writes on its stdout.
pub const LOG_PREFIX: &str = "odek-egress";

/// The most characters of a host name ([`valid_host`]).
pub const MAX_HOST: usize = 253;

/// One allowlist entry: a host pattern and the ports it allows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// `name.example` or `*.example`, lower case, no trailing dot.
    pub host: String,
    /// Allowed ports, sorted, no duplicates, never empty.
    pub ports: Vec<u16>,
}

impl Rule {
    /// Parses one `sandbox_egress` entry: `HOST`, `*.DOMAIN`, either with
    /// `:PORT` (1–65535). A bare host allows [`DEFAULT_PORTS`].
    ///
    /// # Errors
    /// The reason, for people: an empty entry, `*` alone, a wildcard
    /// anywhere but a leading `*.`, an IP address (name hosts: an address
    /// has no name to check against the TLS SNI), a name outside
    /// [`valid_host`], a bad port.
    pub fn parse(text: &str) -> Result<Rule, String> {
        let t = text.trim();
        if t.is_empty() {
            return Err("is empty".into());
        }
        if t.starts_with('[') || t.parse::<IpAddr>().is_ok() {
            return Err("is an IP address; name hosts (the proxy checks names, and the TLS SNI against them)".into());
        }
        let (host, ports) = match t.rsplit_once(':') {
            Some((h, p)) => {
                let port: u16 = p
                    .parse()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| format!("has port {p:?}; a port is 1-65535"))?;
                (h, vec![port])
            }
            None => (t, DEFAULT_PORTS.to_vec()),
        };
        let host = normalize(host);
        if host == "*" {
            return Err("is `*` alone, which would allow every host; name the hosts (or use sandbox_network=bridge for open egress)".into());
        }
        let name = host.strip_prefix("*.").unwrap_or(&host);
        if name.contains('*') {
            return Err("has a `*` that is not a leading `*.`".into());
        }
        if name.parse::<IpAddr>().is_ok() || !valid_host(name) {
            return Err("is not a host name (letters, digits, `-` and `.`, labels of 1-63, at most 253 in all, the last not a number)".into());
        }
        Ok(Rule { host, ports })
    }

    /// True when this rule's pattern matches `host` (normalized).
    pub fn matches_host(&self, host: &str) -> bool {
        match self.host.strip_prefix("*.") {
            Some(domain) => host
                .strip_suffix(domain)
                .is_some_and(|rest| rest.len() > 1 && rest.ends_with('.')),
            None => self.host == host,
        }
    }

    /// True when everything `other` allows, this rule allows too (a
    /// project's entry that only narrows the operator's).
    pub fn covers(&self, other: &Rule) -> bool {
        if !other.ports.iter().all(|p| self.ports.contains(p)) {
            return false;
        }
        match (self.host.strip_prefix("*."), other.host.strip_prefix("*.")) {
            (None, None) => self.host == other.host,
            (None, Some(_)) => false,
            (Some(_), None) => self.matches_host(&other.host),
            (Some(mine), Some(theirs)) => {
                theirs == mine
                    || theirs
                        .strip_suffix(mine)
                        .is_some_and(|rest| rest.ends_with('.') && rest.len() > 1)
            }
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ports == DEFAULT_PORTS {
            f.write_str(&self.host)
        } else {
            let ports: Vec<String> = self.ports.iter().map(u16::to_string).collect();
            write!(f, "{}:{}", self.host, ports.join(","))
        }
    }
}

/// Parses a whole allowlist ([`Rule::parse`] for each entry) and merges
/// entries of one host into one rule (ports united), in the order first
/// written.
///
/// # Errors
/// The first bad entry, quoted, with its reason.
pub fn parse_rules<S: AsRef<str>>(entries: &[S]) -> Result<Vec<Rule>, String> {
    let mut rules: Vec<Rule> = Vec::new();
    for e in entries {
        let r = Rule::parse(e.as_ref()).map_err(|why| format!("{:?} {why}", e.as_ref()))?;
        match rules.iter_mut().find(|x| x.host == r.host) {
            Some(x) => {
                x.ports.extend(r.ports);
                x.ports.sort_unstable();
                x.ports.dedup();
            }
            None => rules.push(r),
        }
    }
    Ok(rules)
}

/// True when every rule of `narrow` is covered by a rule of `wide`: a
/// project list that only narrows the operator's (SPEC §3.2).
pub fn narrows(wide: &[Rule], narrow: &[Rule]) -> bool {
    narrow.iter().all(|n| wide.iter().any(|w| w.covers(n)))
}

/// Lower case, surrounding space and one trailing dot removed.
pub fn normalize(host: &str) -> String {
    let h = host.trim().to_ascii_lowercase();
    h.strip_suffix('.').map(str::to_string).unwrap_or(h)
}

/// True for a DNS host name as the proxy accepts it: ASCII letters,
/// digits, `-` and `.`; labels of 1–63 characters that neither start nor
/// end with `-`; at most [`MAX_HOST`] characters. Anything else (spaces,
/// escapes, `_`, `@`) is refused unseen and never echoed raw.
pub fn valid_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= MAX_HOST
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
        && !host.rsplit('.').next().is_some_and(numeric_label)
}

/// A label the C resolver reads as a number (`127`, `0x7f`): a name whose
/// last label is one is an IPv4 address to `inet_aton` (`2130706433`,
/// `127.1`, `0x7f.1`), never a host name (no top-level domain is numeric).
fn numeric_label(l: &str) -> bool {
    let hex = l
        .strip_prefix("0x")
        .or_else(|| l.strip_prefix("0X"))
        .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
    hex || l.bytes().all(|b| b.is_ascii_digit())
}

/// An IPv4 or IPv6 network, `address/prefix`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subnet {
    /// The network's address.
    pub addr: IpAddr,
    /// The prefix length (≤ 32 for IPv4, ≤ 128 for IPv6).
    pub prefix: u8,
}

impl Subnet {
    /// Parses `a.b.c.d/n` or `x::y/n`.
    ///
    /// # Errors
    /// The reason, for people.
    pub fn parse(text: &str) -> Result<Subnet, String> {
        let (a, p) = text
            .split_once('/')
            .ok_or_else(|| format!("{text:?} is not address/prefix"))?;
        let addr: IpAddr = a.parse().map_err(|_| format!("{a:?} is not an address"))?;
        let prefix: u8 = p.parse().map_err(|_| format!("{p:?} is not a prefix"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return Err(format!("prefix {prefix} is longer than {max}"));
        }
        Ok(Subnet { addr, prefix })
    }

    /// True when `ip` lies inside (an IPv4-mapped IPv6 address counts as
    /// its IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, unmap(ip)) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

impl fmt::Display for Subnet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// What kind of address an IP is, for the refusal of names that resolve
/// inside the machine or its provider ([`classify`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressClass {
    /// Anything routable on the internet.
    Public,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `10/8`, `172.16/12`, `192.168/16`, `fc00::/7`.
    Private,
    /// `169.254/16`, `fe80::/10`.
    LinkLocal,
    /// A cloud metadata endpoint: `169.254.169.254`, `fd00:ec2::254`,
    /// `100.100.100.200`, `192.0.0.192`.
    Metadata,
    /// `100.64/10` (carrier-grade NAT, also some providers' internal range).
    Shared,
    /// `0/8`, `::`.
    Unspecified,
    /// `224/4`, `ff00::/8`, `255.255.255.255`.
    Multicast,
    /// Documentation, benchmarking, protocol-assignment, NAT64 and future
    /// ranges.
    Reserved,
}

impl AddressClass {
    /// The class's name in messages (`private`, `loopback`, …).
    pub fn name(self) -> &'static str {
        match self {
            AddressClass::Public => "public",
            AddressClass::Loopback => "loopback",
            AddressClass::Private => "private",
            AddressClass::LinkLocal => "link-local",
            AddressClass::Metadata => "metadata",
            AddressClass::Shared => "shared (CGNAT)",
            AddressClass::Unspecified => "unspecified",
            AddressClass::Multicast => "multicast",
            AddressClass::Reserved => "reserved",
        }
    }

    /// True for classes no subnet makes reachable: the proxy's own
    /// loopback, "any address", multicast and metadata endpoints.
    pub fn never(self) -> bool {
        matches!(
            self,
            AddressClass::Loopback
                | AddressClass::Unspecified
                | AddressClass::Multicast
                | AddressClass::Metadata
        )
    }
}

/// An IPv4-mapped IPv6 address as its IPv4 address; others unchanged.
fn unmap(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => ip,
        },
        v4 => v4,
    }
}

/// The class of `ip` (an IPv4-mapped IPv6 address is classified as its
/// IPv4 address).
pub fn classify(ip: IpAddr) -> AddressClass {
    match unmap(ip) {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    let o = ip.octets();
    let within = |net: [u8; 4], prefix: u8| {
        Subnet {
            addr: IpAddr::V4(Ipv4Addr::from(net)),
            prefix,
        }
        .contains(IpAddr::V4(ip))
    };
    if [[169, 254, 169, 254], [100, 100, 100, 200], [192, 0, 0, 192]].contains(&o) {
        AddressClass::Metadata
    } else if o[0] == 127 {
        AddressClass::Loopback
    } else if o[0] == 0 {
        AddressClass::Unspecified
    } else if o[0] == 10 || within([172, 16, 0, 0], 12) || within([192, 168, 0, 0], 16) {
        AddressClass::Private
    } else if within([169, 254, 0, 0], 16) {
        AddressClass::LinkLocal
    } else if within([100, 64, 0, 0], 10) {
        AddressClass::Shared
    } else if within([224, 0, 0, 0], 4) || o == [255, 255, 255, 255] {
        AddressClass::Multicast
    } else if within([240, 0, 0, 0], 4)
        || within([192, 0, 0, 0], 24)
        || within([192, 0, 2, 0], 24)
        || within([198, 51, 100, 0], 24)
        || within([203, 0, 113, 0], 24)
        || within([198, 18, 0, 0], 15)
    {
        AddressClass::Reserved
    } else {
        AddressClass::Public
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    let s = ip.segments();
    let within = |net: Ipv6Addr, prefix: u8| {
        Subnet {
            addr: IpAddr::V6(net),
            prefix,
        }
        .contains(IpAddr::V6(ip))
    };
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        AddressClass::Metadata
    } else if ip.is_loopback() {
        AddressClass::Loopback
    } else if ip.is_unspecified() {
        AddressClass::Unspecified
    } else if s[0] & 0xfe00 == 0xfc00 {
        AddressClass::Private
    } else if s[0] & 0xffc0 == 0xfe80 {
        AddressClass::LinkLocal
    } else if s[0] & 0xff00 == 0xff00 {
        AddressClass::Multicast
    } else if within(Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96)
        || within(Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48)
        || within(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32)
        || within(Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0), 64)
        || s[0] & 0xe000 != 0x2000
    {
        // Only 2000::/3 is global unicast.
        AddressClass::Reserved
    } else {
        AddressClass::Public
    }
}

/// Why the proxy refused a request. Its text names the policy
/// (`sandbox_egress`), so an agent knows whom to ask.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Denial {
    /// The host is not a valid name ([`valid_host`]); never echoed.
    InvalidHost,
    /// No rule matches the host.
    NotListed,
    /// A rule matches the host, but not this port.
    PortNotListed,
    /// The name resolved only to addresses the policy refuses (the first
    /// one and its class).
    Address(IpAddr, AddressClass),
    /// The name did not resolve.
    Unresolved,
    /// A CONNECT tunnel whose first bytes are not a TLS ClientHello.
    NotTls,
    /// A ClientHello without a server name.
    NoSni,
    /// A ClientHello naming another server than the CONNECT request.
    SniMismatch(String),
    /// A request the proxy does not forward (not CONNECT, not an absolute
    /// `http://` URI, a Host header that differs from the URI's host).
    Unsupported(String),
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Denial::InvalidHost => f.write_str("the host is not a valid name"),
            Denial::NotListed => f.write_str("the host is not in sandbox_egress"),
            Denial::PortNotListed => f.write_str("the port is not allowed for this host by sandbox_egress"),
            Denial::Address(ip, class) => write!(
                f,
                "the name resolves to {ip}, a {} address, which the egress policy refuses even for listed hosts",
                class.name()
            ),
            Denial::Unresolved => f.write_str("the name does not resolve"),
            Denial::NotTls => f.write_str("the tunnel did not start with a TLS ClientHello"),
            Denial::NoSni => f.write_str("the TLS ClientHello names no server (SNI)"),
            Denial::SniMismatch(sni) => write!(
                f,
                "the TLS ClientHello names another server ({}) than the CONNECT request",
                shown_host(sni)
            ),
            Denial::Unsupported(what) => f.write_str(what),
        }
    }
}

/// `host` when it is a valid name ([`valid_host`]), else `(invalid name)`:
/// what the proxy echoes, logs and odek lists is never raw agent input.
pub fn shown_host(host: &str) -> String {
    let h = normalize(host);
    if valid_host(&h) {
        h
    } else {
        "(invalid name)".into()
    }
}

/// The whole policy the proxy applies (its JSON is the proxy's argument).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Always [`POLICY_VERSION`].
    pub version: u32,
    /// The allowlist; empty = nothing is allowed.
    pub allow: Vec<Rule>,
    /// The egress network's own subnets (`a.b.c.d/n`): addresses there are
    /// allowed whatever their class (that network stands for the outside),
    /// except [`Policy::refuse`] and the classes that are
    /// [`AddressClass::never`].
    pub outside: Vec<String>,
    /// Addresses refused even inside [`Policy::outside`]: the egress
    /// network's gateways (the host).
    pub refuse: Vec<String>,
    /// The port the proxy listens on.
    pub port: u16,
}

impl Policy {
    /// A policy of `allow`, with the egress network's `outside` subnets
    /// and `refuse`d gateways, listening on [`PROXY_PORT`].
    pub fn new(allow: Vec<Rule>, outside: Vec<String>, refuse: Vec<String>) -> Policy {
        Policy {
            version: POLICY_VERSION,
            allow,
            outside,
            refuse,
            port: PROXY_PORT,
        }
    }

    /// The policy's JSON as odek passes it and the proxy re-serializes it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a policy serializes")
    }

    /// Parses and checks a policy's JSON (what the proxy does first).
    ///
    /// # Errors
    /// Malformed JSON, unknown fields, another version, a rule that
    /// [`Rule::parse`] would not give, a bad subnet or address.
    pub fn from_json(text: &str) -> Result<Policy, String> {
        let p: Policy = serde_json::from_str(text).map_err(|e| format!("bad policy: {e}"))?;
        if p.version != POLICY_VERSION {
            return Err(format!(
                "policy version {} (this proxy speaks {POLICY_VERSION})",
                p.version
            ));
        }
        for r in &p.allow {
            let again = Rule::parse(&r.host).map_err(|e| format!("rule {:?} {e}", r.host))?;
            if again.host != r.host || r.ports.is_empty() || r.ports.contains(&0) {
                return Err(format!("rule {:?} is not normalized", r.host));
            }
        }
        for s in &p.outside {
            Subnet::parse(s)?;
        }
        for a in &p.refuse {
            a.parse::<IpAddr>()
                .map_err(|_| format!("{a:?} is not an address"))?;
        }
        Ok(p)
    }

    /// The SHA-256 (64 lowercase hex) of [`Policy::to_json`]: the proxy
    /// prints it on its ready line and odek refuses a proxy whose hash is
    /// not the one of the policy it wrote.
    pub fn hash(&self) -> String {
        hex::encode(Sha256::digest(self.to_json().as_bytes()))
    }

    /// The name check of a request for `host`:`port` (before any lookup).
    ///
    /// # Errors
    /// [`Denial::InvalidHost`], [`Denial::NotListed`] or
    /// [`Denial::PortNotListed`].
    pub fn check_name(&self, host: &str, port: u16) -> Result<(), Denial> {
        let h = normalize(host);
        // An address literal is a valid target, never a listed one.
        if h.parse::<IpAddr>().is_ok() {
            return Err(Denial::NotListed);
        }
        if !valid_host(&h) {
            return Err(Denial::InvalidHost);
        }
        let matching: Vec<&Rule> = self.allow.iter().filter(|r| r.matches_host(&h)).collect();
        if matching.is_empty() {
            return Err(Denial::NotListed);
        }
        if matching.iter().any(|r| r.ports.contains(&port)) {
            Ok(())
        } else {
            Err(Denial::PortNotListed)
        }
    }

    /// The address check of one address a listed name resolved to.
    ///
    /// # Errors
    /// [`Denial::Address`] with the address's class.
    pub fn check_address(&self, ip: IpAddr) -> Result<(), Denial> {
        let class = classify(ip);
        let ip = unmap(ip);
        if class.never() || self.refuse.iter().any(|r| r.parse::<IpAddr>() == Ok(ip)) {
            return Err(Denial::Address(ip, class));
        }
        if class == AddressClass::Public {
            return Ok(());
        }
        let inside = self
            .outside
            .iter()
            .filter_map(|s| Subnet::parse(s).ok())
            .any(|s| s.contains(ip));
        if inside {
            Ok(())
        } else {
            Err(Denial::Address(ip, class))
        }
    }

    /// The first of `addrs` (in order) that passes
    /// [`Policy::check_address`]: the address the proxy connects to, never
    /// resolving again.
    ///
    /// # Errors
    /// [`Denial::Unresolved`] for no address; else the first address's
    /// denial.
    pub fn pick_address(&self, addrs: &[IpAddr]) -> Result<IpAddr, Denial> {
        let mut first = None;
        for a in addrs {
            match self.check_address(*a) {
                Ok(()) => return Ok(*a),
                Err(d) => {
                    first.get_or_insert(d);
                }
            }
        }
        Err(first.unwrap_or(Denial::Unresolved))
    }

    /// The allowlist as written back (`pypi.org`, `x.test:8443`), for
    /// messages.
    pub fn allowed_text(&self) -> String {
        if self.allow.is_empty() {
            "nothing (the allowlist is empty)".into()
        } else {
            self.allow
                .iter()
                .map(Rule::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        }
    }
}

/// The ready line the proxy prints once it listens:
/// `odek-egress ready policy=<hash> port=<port>`.
pub fn ready_line(policy: &Policy) -> String {
    format!(
        "{LOG_PREFIX} ready policy={} port={}",
        policy.hash(),
        policy.port
    )
}

/// The log line of a refusal: `odek-egress deny <host>:<port> <reason>`
/// (the host as [`shown_host`] shows it).
pub fn deny_line(host: &str, port: u16, why: &Denial) -> String {
    format!("{LOG_PREFIX} deny {}:{port} {why}", shown_host(host))
}

/// The `host:port` of each refusal in the proxy's log, in order, without
/// repeats (what `describe` lists as denied).
pub fn denied_in_log(log: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in log.lines() {
        let Some(rest) = line.trim_start().strip_prefix(LOG_PREFIX) else {
            continue;
        };
        let Some(rest) = rest.strip_prefix(" deny ") else {
            continue;
        };
        let Some(target) = rest.split_whitespace().next() else {
            continue;
        };
        let ok = target
            .rsplit_once(':')
            .is_some_and(|(h, p)| valid_host(h) && p.parse::<u16>().is_ok());
        if ok && !out.iter().any(|t| t == target) {
            out.push(target.to_string());
        }
    }
    out
}

/// The hash on the proxy's ready line in `log`, if it printed one.
pub fn ready_hash(log: &str) -> Option<String> {
    log.lines().find_map(|l| {
        let rest = l
            .trim()
            .strip_prefix(LOG_PREFIX)?
            .strip_prefix(" ready policy=")?;
        let hash = rest.split_whitespace().next()?;
        (hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit())).then(|| hash.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(v: &[&str]) -> Vec<Rule> {
        parse_rules(v).expect("valid")
    }

    #[test]
    fn a_bare_host_allows_80_and_443_and_a_port_only_itself() {
        assert_eq!(Rule::parse("PyPI.org.").expect("ok").ports, vec![80, 443]);
        assert_eq!(Rule::parse("PyPI.org.").expect("ok").host, "pypi.org");
        assert_eq!(Rule::parse("x.test:8443").expect("ok").ports, vec![8443]);
        let merged = rules(&["a.test", "a.test:22", "b.test:1"]);
        assert_eq!(merged[0].ports, vec![22, 80, 443]);
        assert_eq!(merged[0].to_string(), "a.test:22,80,443");
        assert_eq!(merged[1].to_string(), "b.test:1");
    }

    #[test]
    fn bad_entries_are_refused_with_a_reason() {
        for bad in [
            "",
            "*",
            "*.",
            "a.*.b",
            "10.0.0.1",
            "[::1]:443",
            "::1",
            "a b",
            "a_b.test",
            "x.test:0",
            "x.test:70000",
            "x.test:",
            "-a.test",
            "a..b",
            "\u{1b}[2J.test",
            // What inet_aton reads as an address: a numeric last label.
            "2130706433",
            "127.1",
            "0x7f.1",
            "a.0X1F",
            "*.10",
        ] {
            assert!(Rule::parse(bad).is_err(), "{bad:?} accepted");
        }
        let long = format!("{}.test", "a".repeat(64));
        assert!(Rule::parse(&long).is_err());
        assert!(parse_rules(&["ok.test", "no way"])
            .expect_err("refused")
            .contains("\"no way\""));
    }

    #[test]
    fn wildcards_match_names_below_the_domain_only() {
        let r = Rule::parse("*.githubusercontent.com").expect("ok");
        assert!(r.matches_host("raw.githubusercontent.com"));
        assert!(r.matches_host("a.b.githubusercontent.com"));
        assert!(!r.matches_host("githubusercontent.com"));
        assert!(!r.matches_host("evilgithubusercontent.com"));
        assert!(!r.matches_host("githubusercontent.com.evil.test"));
        let exact = Rule::parse("pypi.org").expect("ok");
        assert!(exact.matches_host("pypi.org"));
        assert!(!exact.matches_host("files.pypi.org"));
    }

    #[test]
    fn the_name_check_needs_a_listed_host_and_port() {
        let p = Policy::new(rules(&["allowed.test", "*.cdn.test:8443"]), vec![], vec![]);
        assert_eq!(p.check_name("allowed.test", 443), Ok(()));
        assert_eq!(p.check_name("ALLOWED.test.", 80), Ok(()));
        assert_eq!(p.check_name("allowed.test", 22), Err(Denial::PortNotListed));
        assert_eq!(p.check_name("denied.test", 443), Err(Denial::NotListed));
        assert_eq!(p.check_name("a.cdn.test", 8443), Ok(()));
        assert_eq!(p.check_name("a.cdn.test", 443), Err(Denial::PortNotListed));
        assert_eq!(p.check_name("10.0.0.1", 443), Err(Denial::NotListed));
        assert_eq!(p.check_name("2130706433", 443), Err(Denial::InvalidHost));
        assert_eq!(p.check_name("a\nb", 443), Err(Denial::InvalidHost));
        let empty = Policy::new(vec![], vec![], vec![]);
        assert_eq!(
            empty.check_name("allowed.test", 443),
            Err(Denial::NotListed)
        );
        assert_eq!(empty.allowed_text(), "nothing (the allowlist is empty)");
    }

    #[test]
    fn addresses_are_classified() {
        let c = |s: &str| classify(s.parse().expect("ip"));
        assert_eq!(c("151.101.0.223"), AddressClass::Public);
        assert_eq!(c("127.0.0.1"), AddressClass::Loopback);
        assert_eq!(c("10.1.2.3"), AddressClass::Private);
        assert_eq!(c("172.31.255.255"), AddressClass::Private);
        assert_eq!(c("172.32.0.1"), AddressClass::Public);
        assert_eq!(c("192.168.1.1"), AddressClass::Private);
        assert_eq!(c("169.254.1.1"), AddressClass::LinkLocal);
        assert_eq!(c("169.254.169.254"), AddressClass::Metadata);
        assert_eq!(c("100.100.100.200"), AddressClass::Metadata);
        assert_eq!(c("100.64.0.1"), AddressClass::Shared);
        assert_eq!(c("0.0.0.0"), AddressClass::Unspecified);
        assert_eq!(c("224.0.0.1"), AddressClass::Multicast);
        assert_eq!(c("255.255.255.255"), AddressClass::Multicast);
        assert_eq!(c("198.18.0.1"), AddressClass::Reserved);
        assert_eq!(c("::1"), AddressClass::Loopback);
        assert_eq!(c("::"), AddressClass::Unspecified);
        assert_eq!(c("fd12::1"), AddressClass::Private);
        assert_eq!(c("fd00:ec2::254"), AddressClass::Metadata);
        assert_eq!(c("fe80::1"), AddressClass::LinkLocal);
        assert_eq!(c("ff02::1"), AddressClass::Multicast);
        assert_eq!(c("2001:db8::1"), AddressClass::Reserved);
        assert_eq!(c("64:ff9b::a00:1"), AddressClass::Reserved);
        assert_eq!(c("2606:4700::1"), AddressClass::Public);
        // An IPv4-mapped address is its IPv4 address.
        assert_eq!(c("::ffff:10.0.0.1"), AddressClass::Private);
        assert_eq!(c("::ffff:127.0.0.1"), AddressClass::Loopback);
    }

    #[test]
    fn private_addresses_pass_only_inside_the_egress_subnets_and_never_the_gateway() {
        let p = Policy::new(
            rules(&["allowed.test"]),
            vec!["172.30.0.0/16".into(), "fd99::/64".into()],
            vec!["172.30.0.1".into()],
        );
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        assert_eq!(p.check_address(ip("172.30.0.5")), Ok(()));
        assert_eq!(p.check_address(ip("::ffff:172.30.0.5")), Ok(()));
        assert_eq!(p.check_address(ip("fd99::5")), Ok(()));
        assert_eq!(p.check_address(ip("8.8.8.8")), Ok(()));
        assert!(matches!(
            p.check_address(ip("172.30.0.1")),
            Err(Denial::Address(_, AddressClass::Private))
        ));
        assert!(matches!(
            p.check_address(ip("172.31.0.5")),
            Err(Denial::Address(_, AddressClass::Private))
        ));
        assert!(matches!(
            p.check_address(ip("127.0.0.1")),
            Err(Denial::Address(_, AddressClass::Loopback))
        ));
        // A metadata address is refused even inside the subnets.
        let wide = Policy::new(vec![], vec!["169.254.0.0/16".into()], vec![]);
        assert!(matches!(
            wide.check_address(ip("169.254.169.254")),
            Err(Denial::Address(_, AddressClass::Metadata))
        ));
        assert_eq!(wide.check_address(ip("169.254.3.3")), Ok(()));
        // The first acceptable address is the one used; none: the first denial.
        assert_eq!(
            p.pick_address(&[ip("10.0.0.1"), ip("172.30.0.9")]),
            Ok(ip("172.30.0.9"))
        );
        assert!(matches!(
            p.pick_address(&[ip("10.0.0.1"), ip("127.0.0.1")]),
            Err(Denial::Address(a, AddressClass::Private)) if a == ip("10.0.0.1")
        ));
        assert_eq!(p.pick_address(&[]), Err(Denial::Unresolved));
    }

    #[test]
    fn subnets_parse_and_contain() {
        let s = Subnet::parse("10.0.0.0/8").expect("ok");
        assert!(s.contains("10.255.0.1".parse().expect("ip")));
        assert!(!s.contains("11.0.0.1".parse().expect("ip")));
        assert!(!s.contains("::1".parse().expect("ip")));
        assert!(Subnet::parse("0.0.0.0/0")
            .expect("ok")
            .contains("1.2.3.4".parse().expect("ip")));
        assert!(Subnet::parse("10.0.0.0/33").is_err());
        assert!(Subnet::parse("10.0.0.0").is_err());
        assert_eq!(s.to_string(), "10.0.0.0/8");
    }

    #[test]
    fn narrowing_is_coverage_by_the_wider_list() {
        let wide = rules(&["*.example.com", "pypi.org"]);
        assert!(narrows(&wide, &rules(&["a.example.com", "pypi.org:443"])));
        assert!(narrows(&wide, &rules(&["*.b.example.com"])));
        assert!(narrows(&wide, &[]));
        assert!(!narrows(&wide, &rules(&["example.com"])));
        assert!(!narrows(&wide, &rules(&["pypi.org:8080"])));
        assert!(!narrows(&wide, &rules(&["files.pypi.org"])));
        assert!(!narrows(&rules(&["pypi.org"]), &rules(&["*.pypi.org"])));
    }

    #[test]
    fn the_json_round_trips_and_its_hash_is_what_the_ready_line_says() {
        let p = Policy::new(
            rules(&["allowed.test", "x.test:8443"]),
            vec!["172.30.0.0/16".into()],
            vec!["172.30.0.1".into()],
        );
        let again = Policy::from_json(&p.to_json()).expect("parses");
        assert_eq!(again, p);
        assert_eq!(again.hash(), p.hash());
        assert_eq!(
            ready_hash(&format!("noise\n{}\n", ready_line(&p))),
            Some(p.hash())
        );
        assert_eq!(ready_hash("odek-egress ready policy=zz"), None);
        // Another policy has another hash.
        let other = Policy::new(rules(&["allowed.test"]), vec![], vec![]);
        assert_ne!(other.hash(), p.hash());
        // What the proxy refuses to load.
        assert!(Policy::from_json(&p.to_json().replace("\"version\":1", "\"version\":2")).is_err());
        assert!(Policy::from_json(&p.to_json().replace("allowed.test", "ALLOWED.test")).is_err());
        assert!(
            Policy::from_json(&p.to_json().replace("\"port\"", "\"extra\":1,\"port\"")).is_err()
        );
        assert!(Policy::from_json("{").is_err());
    }

    #[test]
    fn denied_hosts_are_read_back_from_the_log_once_each_and_never_raw() {
        let log = [
            deny_line("denied.test", 443, &Denial::NotListed),
            "odek-egress allow allowed.test:443".to_string(),
            deny_line("DENIED.test", 443, &Denial::NotListed),
            deny_line("evil\u{1b}[2J", 80, &Denial::InvalidHost),
            deny_line("allowed.test", 22, &Denial::PortNotListed),
            "odek-egress deny garbage".to_string(),
        ]
        .join("\n");
        assert_eq!(
            denied_in_log(&log),
            vec!["denied.test:443", "allowed.test:22"]
        );
        assert!(deny_line("evil\u{1b}", 80, &Denial::InvalidHost).contains("(invalid name)"));
        assert!(Denial::NotListed.to_string().contains("sandbox_egress"));
    }
}
