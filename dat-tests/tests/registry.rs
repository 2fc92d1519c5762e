//! The conformance suite on the IA named by `$DAT_TEST_IA` (every case skipped when unset).

use dat_tests::RegistryTarget;

dat_tests::conformance_suite!(user_ia, RegistryTarget::from_env());
