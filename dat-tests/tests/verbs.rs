//! The conformance suite on a verbs IA: `rxe0` (Soft-RoCE in `../shared/rxe-vm`, registry
//! `dat-provider-verbs/tests/rxe.toml`), or the IA named by `$DAT_TEST_VERBS_IA`.
//!
//! Every case is skipped with the reason (`SKIPPED [...]` on stderr) when the `verbs` feature
//! is off or the IA is not configured; with the IA configured but no device, every case fails
//! at IA open naming the cause. `dat-provider-verbs/tests/rxe-suite.sh` builds this on the host
//! and runs it in the VM.

use dat_tests::RegistryTarget;

fn verbs_target() -> RegistryTarget {
    let ia = std::env::var("DAT_TEST_VERBS_IA").unwrap_or_else(|_| "rxe0".to_owned());
    // TEST-NET-2: the VM has no route there, so rdma_cm fails address resolution at once.
    RegistryTarget::new(&ia).with_unreachable("198.51.100.1:0".parse().unwrap())
}

dat_tests::conformance_suite!(verbs, verbs_target());
