//! What the suite runs against: the [`Target`] trait and its two implementations, the
//! in-memory [`FabricTarget`] and the configured [`RegistryTarget`].

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use dat::types::{ConnQual, IaAddress};
use dat::{Ia, IaOpenError, Registry};
use dat_core::config::{Source, parse_toml};
use dat_core::testing::{Fabric, MemProvider};

/// The async EVD length every IA of the suite is opened with.
pub const ASYNC_QLEN: i32 = 64;

/// One provider (or IA) the suite can run against. Implementations must be usable from many
/// threads at once: cases run in parallel.
pub trait Target: Send + Sync {
    /// A short name for reports (`fabric`, `tcp-lo`, ...).
    fn name(&self) -> &str;

    /// `Err(reason)` if the target cannot run at all (provider not compiled in, IA not
    /// configured); every case is then reported as skipped with that reason.
    ///
    /// # Errors
    /// The reason the target is unavailable.
    fn available(&self) -> Result<(), String>;

    /// Two freshly opened IAs that can reach each other.
    ///
    /// # Panics
    /// If the IAs cannot be opened (the case fails).
    fn open_pair(&self) -> (Ia, Ia);

    /// Opens the IA called `name` the way this target resolves names (used to check
    /// `DAT_PROVIDER_NOT_FOUND` for unknown names).
    ///
    /// # Errors
    /// The registry's [`IaOpenError`].
    fn open_by_name(&self, name: &str) -> Result<Ia, IaOpenError>;

    /// The IA name [`Target::open_by_name`] opens successfully.
    fn ia_name(&self) -> &str;

    /// True if IAs of this target can talk across processes (cases with a killed peer).
    fn multi_process(&self) -> bool;

    /// True if nothing happens between calls unless the test drives it (the in-memory fabric).
    /// Fleeting states such as COMPLETION_PENDING can only be held open on such a target;
    /// on a real transport they end whenever the peer's next frame arrives.
    fn deterministic(&self) -> bool {
        false
    }

    /// A fresh connection qualifier, unique per call (cases run in parallel threads).
    fn qual(&self) -> ConnQual;

    /// Lets `d` of connect-timeout time pass for `ia`: the fabric moves its virtual clock,
    /// a real transport sleeps.
    fn let_time_pass(&self, ia: &Ia, d: Duration);

    /// An address no IA answers on, if the target has one (`UNREACHABLE` cases).
    fn unreachable_address(&self) -> Option<IaAddress>;
}

/// The deterministic in-memory fabric of `dat_core::testing`: always available, one private
/// fabric per pair (so parallel cases never share a clock or a queue).
#[derive(Default)]
pub struct FabricTarget {
    next_pair: AtomicU32,
    next_qual: AtomicU64,
    fabrics: Mutex<HashMap<IpAddr, Weak<Fabric>>>,
}

impl FabricTarget {
    /// A fabric target.
    pub fn new() -> FabricTarget {
        FabricTarget {
            next_pair: AtomicU32::new(1),
            next_qual: AtomicU64::new(1000),
            fabrics: Mutex::new(HashMap::new()),
        }
    }

    fn registry(fabric: &Arc<Fabric>, a: Ipv4Addr, b: Ipv4Addr) -> Registry {
        let text = format!(
            "version = 1\ndefault = \"a\"\n\n[[ia]]\nname = \"a\"\nprovider = \"mem\"\nparams = {{ address = \"{a}\" }}\n\n[[ia]]\nname = \"b\"\nprovider = \"mem\"\nparams = {{ address = \"{b}\" }}\n"
        );
        // The text is built here from two IPv4 addresses: it always parses.
        let cfg = parse_toml(&text, Source::Embedded, &["mem"]).unwrap_or_else(|e| {
            panic!("fabric registry does not parse: {e}");
        });
        Registry::new(cfg, vec![MemProvider::new(fabric.clone())])
    }

    fn addresses(&self) -> (Ipv4Addr, Ipv4Addr) {
        let n = self.next_pair.fetch_add(1, Ordering::Relaxed);
        let [_, x, y, z] = n.to_be_bytes();
        // 10.x.y.z for a, 11.x.y.z for b; 12.0.0.0/8 stays unused (unreachable).
        (Ipv4Addr::new(10, x, y, z), Ipv4Addr::new(11, x, y, z))
    }
}

impl Target for FabricTarget {
    fn name(&self) -> &str {
        "fabric"
    }

    fn available(&self) -> Result<(), String> {
        Ok(())
    }

    fn open_pair(&self) -> (Ia, Ia) {
        let fabric = Fabric::new();
        let (a, b) = self.addresses();
        let reg = FabricTarget::registry(&fabric, a, b);
        {
            let mut m = crate::lock(&self.fabrics);
            m.retain(|_, w| w.strong_count() > 0);
            m.insert(IpAddr::V4(a), Arc::downgrade(&fabric));
            m.insert(IpAddr::V4(b), Arc::downgrade(&fabric));
        }
        let ia_a = reg
            .open_ia(Some("a"), ASYNC_QLEN)
            .unwrap_or_else(|e| panic!("open fabric IA a: {e}"));
        let ia_b = reg
            .open_ia(Some("b"), ASYNC_QLEN)
            .unwrap_or_else(|e| panic!("open fabric IA b: {e}"));
        (ia_a, ia_b)
    }

    fn open_by_name(&self, name: &str) -> Result<Ia, IaOpenError> {
        let fabric = Fabric::new();
        let (a, b) = self.addresses();
        FabricTarget::registry(&fabric, a, b).open_ia(Some(name), ASYNC_QLEN)
    }

    fn ia_name(&self) -> &str {
        "a"
    }

    fn multi_process(&self) -> bool {
        false
    }

    fn deterministic(&self) -> bool {
        true
    }

    fn qual(&self) -> ConnQual {
        ConnQual(self.next_qual.fetch_add(1, Ordering::Relaxed))
    }

    fn let_time_pass(&self, ia: &Ia, d: Duration) {
        // Deliver what is queued first, so the clock moves past the requests in flight.
        ia.progress();
        let fabric = crate::lock(&self.fabrics)
            .get(&ia.attr().ia_address.ip())
            .and_then(Weak::upgrade);
        match fabric {
            Some(f) => f.advance(d),
            None => std::thread::sleep(d),
        }
    }

    fn unreachable_address(&self) -> Option<IaAddress> {
        Some(IaAddress::new(IpAddr::V4(Ipv4Addr::new(12, 9, 9, 9)), 0))
    }
}

/// The first qualifier of this process's slot of 500 in 20000..32000 (the default of
/// `$DAT_TEST_QUAL_BASE`): the slot of the process id, or the next one that no other process
/// on the machine holds. A slot is claimed with a lock on a file in the temporary directory,
/// held until the process exits. Two suites running at once (two worktrees' tests on one
/// machine) got the same pid-derived slot one time in 24 and failed with
/// `DAT_CONN_QUAL_IN_USE`; with the locks they collide only once all 24 slots are taken.
fn qual_slot_base() -> u64 {
    static BASE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *BASE.get_or_init(|| {
        let own = u64::from(std::process::id() % 24);
        for k in 0..24 {
            let slot = (own + k) % 24;
            let path = std::env::temp_dir().join(format!("dat-tests-qual-slot-{slot}.lock"));
            if let Ok(f) = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                && f.try_lock().is_ok()
            {
                // Held (the descriptor stays open) until the process exits.
                std::mem::forget(f);
                return 20_000 + slot * 500;
            }
        }
        20_000 + own * 500
    })
}

/// An IA of the user's configuration, opened by name through [`Registry::from_env`]
/// (`$DAT_CONF`, the user's and the system's `dat.toml`, the embedded default).
///
/// The pair is the IA opened twice (or the IA named by `$DAT_TEST_IA_PEER` for the second
/// side). Connection qualifiers start at `$DAT_TEST_QUAL_BASE` (default: a slot that no other
/// suite running on the machine holds, see `qual_slot_base`, kept below Linux's ephemeral
/// port range, 32768 and up, so a TCP provider's listening port never meets a client
/// socket's).
pub struct RegistryTarget {
    ia: String,
    peer_ia: String,
    unavailable: Option<String>,
    next_qual: AtomicU64,
    unreachable: Option<IaAddress>,
}

impl RegistryTarget {
    /// The IA `name` of the configuration.
    pub fn new(name: &str) -> RegistryTarget {
        let peer_ia = std::env::var("DAT_TEST_IA_PEER").unwrap_or_else(|_| name.to_owned());
        let unavailable = RegistryTarget::check(name).err();
        let base = std::env::var("DAT_TEST_QUAL_BASE")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_else(qual_slot_base);
        RegistryTarget {
            ia: name.to_owned(),
            peer_ia,
            unavailable,
            next_qual: AtomicU64::new(base),
            unreachable: None,
        }
    }

    /// Names an address no IA answers on, for the `UNREACHABLE` cases (`$DAT_TEST_UNREACHABLE`
    /// overrides it). For TCP, a multicast address: the local stack refuses a connection to it
    /// at once (`ENETUNREACH`) and no packet leaves the host.
    pub fn with_unreachable(mut self, addr: IaAddress) -> RegistryTarget {
        self.unreachable = Some(addr);
        self
    }

    /// Hands out connection qualifiers from `base` on: cases of a second target in the same
    /// process (run in parallel with the suite's, whose base depends only on the process id)
    /// then never take the suite's qualifiers.
    pub fn with_qual_base(self, base: u64) -> RegistryTarget {
        self.next_qual.store(base, Ordering::Relaxed);
        self
    }

    /// The IA named by `$DAT_TEST_IA`; unavailable (every case skipped) when it is not set.
    pub fn from_env() -> RegistryTarget {
        match std::env::var("DAT_TEST_IA") {
            Ok(name) if !name.is_empty() => RegistryTarget::new(&name),
            _ => {
                let mut t = RegistryTarget::new("");
                t.unavailable = Some("DAT_TEST_IA is not set".to_owned());
                t
            }
        }
    }

    fn check(name: &str) -> Result<(), String> {
        let reg = Registry::from_env().map_err(|e| format!("configuration: {e}"))?;
        let Some(entry) = reg.config().ias.iter().find(|i| i.name == name) else {
            return Err(format!("IA `{name}` is not in the configuration"));
        };
        if !reg.provider_names().contains(&entry.provider.as_str()) {
            return Err(format!(
                "provider `{}` of IA `{name}` is not compiled into this build (compiled in: {:?})",
                entry.provider,
                reg.provider_names()
            ));
        }
        Ok(())
    }

    fn open(name: &str) -> Result<Ia, IaOpenError> {
        match Registry::from_env() {
            Ok(reg) => reg.open_ia(Some(name), ASYNC_QLEN),
            Err(e) => Err(e.into()),
        }
    }
}

impl Target for RegistryTarget {
    fn name(&self) -> &str {
        &self.ia
    }

    fn available(&self) -> Result<(), String> {
        match &self.unavailable {
            Some(r) => Err(r.clone()),
            None => Ok(()),
        }
    }

    fn open_pair(&self) -> (Ia, Ia) {
        let a =
            RegistryTarget::open(&self.ia).unwrap_or_else(|e| panic!("open IA `{}`: {e}", self.ia));
        let b = RegistryTarget::open(&self.peer_ia)
            .unwrap_or_else(|e| panic!("open IA `{}`: {e}", self.peer_ia));
        (a, b)
    }

    fn open_by_name(&self, name: &str) -> Result<Ia, IaOpenError> {
        RegistryTarget::open(name)
    }

    fn ia_name(&self) -> &str {
        &self.ia
    }

    fn multi_process(&self) -> bool {
        true
    }

    fn qual(&self) -> ConnQual {
        ConnQual(self.next_qual.fetch_add(1, Ordering::Relaxed))
    }

    fn let_time_pass(&self, _ia: &Ia, d: Duration) {
        std::thread::sleep(d);
    }

    fn unreachable_address(&self) -> Option<IaAddress> {
        std::env::var("DAT_TEST_UNREACHABLE")
            .ok()
            .and_then(|s| s.parse().ok())
            .or(self.unreachable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fabric_pairs_are_distinct_and_reach_each_other() {
        let t = FabricTarget::new();
        let (a, b) = t.open_pair();
        let (c, _d) = t.open_pair();
        assert_ne!(a.attr().ia_address, b.attr().ia_address);
        assert_ne!(a.attr().ia_address, c.attr().ia_address);
        assert_ne!(t.qual(), t.qual());
        assert!(t.available().is_ok());
        assert!(!t.multi_process());
        let nowhere = t.unreachable_address().unwrap();
        assert_ne!(nowhere.ip(), a.attr().ia_address.ip());
        assert_ne!(nowhere.ip(), b.attr().ia_address.ip());
    }

    #[test]
    fn fabric_opens_by_name_and_reports_unknown_names() {
        let t = FabricTarget::new();
        assert_eq!(t.open_by_name(t.ia_name()).unwrap().name(), "a");
        let e = t.open_by_name("nope").unwrap_err();
        assert_eq!(e.code().to_raw(), 0x800A_0064);
    }

    #[test]
    fn registry_target_for_an_unconfigured_ia_is_unavailable_with_a_reason() {
        let t = RegistryTarget::new("dat-tests-no-such-ia");
        let reason = t.available().unwrap_err();
        assert!(reason.contains("dat-tests-no-such-ia"), "{reason}");
        assert_eq!(t.name(), "dat-tests-no-such-ia");
    }

    #[test]
    fn registry_target_without_a_compiled_provider_is_unavailable() {
        // `tcp-lo` is in the embedded registry; whether its provider is compiled in decides.
        let t = RegistryTarget::new("tcp-lo");
        let compiled = Registry::from_env()
            .map(|r| r.provider_names().contains(&"tcp"))
            .unwrap_or(false);
        match t.available() {
            Ok(()) => assert!(compiled),
            Err(reason) => assert!(
                !compiled || reason.contains("configuration"),
                "unexpected reason: {reason}"
            ),
        }
    }
}
