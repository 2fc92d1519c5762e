//! The conformance suite on the shared-memory provider (`shm0`); every case is skipped with
//! the reason while the provider is not compiled into `dat`.

use dat_tests::RegistryTarget;

dat_tests::conformance_suite!(shm, RegistryTarget::new("shm0"));

/// The suite's target with qualifiers of its own (the suite's run in parallel in this
/// process, from the same base).
struct OwnQuals {
    inner: RegistryTarget,
    next: std::sync::atomic::AtomicU64,
}

impl dat_tests::Target for OwnQuals {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn available(&self) -> Result<(), String> {
        self.inner.available()
    }
    fn open_pair(&self) -> (dat::Ia, dat::Ia) {
        self.inner.open_pair()
    }
    fn open_by_name(&self, name: &str) -> Result<dat::Ia, dat::IaOpenError> {
        self.inner.open_by_name(name)
    }
    fn ia_name(&self) -> &str {
        self.inner.ia_name()
    }
    fn multi_process(&self) -> bool {
        self.inner.multi_process()
    }
    fn qual(&self) -> dat::types::ConnQual {
        dat::types::ConnQual(self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
    fn let_time_pass(&self, ia: &dat::Ia, d: std::time::Duration) {
        self.inner.let_time_pass(ia, d);
    }
    fn unreachable_address(&self) -> Option<dat::types::IaAddress> {
        self.inner.unreachable_address()
    }
}

/// The case that lost a wake-up of the shm provider's in-provider wait (on by default; about
/// one run in four slept through the provider-created EP's send completion), a hundred
/// times over.
#[test]
fn psp_provider_accept_repeated() {
    let target = OwnQuals {
        inner: RegistryTarget::new("shm0"),
        next: std::sync::atomic::AtomicU64::new(40_000 + u64::from(std::process::id() % 24) * 200),
    };
    for _ in 0..100 {
        dat_tests::run_case(
            &target,
            module_path!(),
            "cm",
            "psp_provider_accept",
            dat_tests::cases::cm::psp_provider_accept,
        );
    }
}
