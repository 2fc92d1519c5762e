//! The conformance suite on the deterministic in-memory fabric.

use dat_tests::FabricTarget;

dat_tests::conformance_suite!(fabric, FabricTarget::new());
