#![allow(clippy::print_stdout)] // cargo reads build script instructions from stdout

//! Compiles the C helper programs the tests run (layout dump, libdat2 open probe, the example
//! consumer) with the `cc` crate's compiler. Missing headers or libraries do not fail the
//! build of the library: the reason is passed to the tests, which fail with it.

use std::path::{Path, PathBuf};

fn compile(out_dir: &Path, name: &str, src: &str, libs: &[&str]) {
    println!("cargo:rerun-if-changed={src}");
    let exe = out_dir.join(name);
    let compiler = cc::Build::new().cargo_metadata(false).get_compiler();
    let mut cmd = compiler.to_command();
    cmd.arg("-o").arg(&exe).arg(src);
    for l in libs {
        cmd.arg(l);
    }
    let var = format!("DATCAPI_{}", name.to_uppercase());
    match cmd.output() {
        Ok(o) if o.status.success() => {
            println!("cargo:rustc-env={var}=ok:{}", exe.display());
        }
        Ok(o) => {
            let why = String::from_utf8_lossy(&o.stderr).replace('\n', " | ");
            println!("cargo:rustc-env={var}=err:compiling {src} failed: {why}");
        }
        Err(e) => println!("cargo:rustc-env={var}=err:cannot run the C compiler: {e}"),
    }
}

fn main() {
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    compile(&out_dir, "layout", "csrc/layout.c", &[]);
    compile(&out_dir, "open_probe", "csrc/open_probe.c", &["-ldat2"]);
    compile(&out_dir, "consumer", "examples/c/consumer.c", &["-ldat2"]);
    println!("cargo:rerun-if-changed=build.rs");
}
