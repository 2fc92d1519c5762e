//! Loads `libdat_capi.so` through the real Debian libdat2 (`dat_ia_open` from a small C
//! program, `DAT_OVERRIDE` pointing at a private dat.conf) and checks the outcome: with no
//! transport provider compiled into `dat`, the open fails with a clean
//! `DAT_PROVIDER_NOT_FOUND` (no crash, libdat2 found and initialised the plug-in); with one,
//! it opens and closes. The C example consumer is run the same way.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

fn program(var: &str) -> PathBuf {
    let built = match var {
        "open_probe" => env!("DATCAPI_OPEN_PROBE"),
        _ => env!("DATCAPI_CONSUMER"),
    };
    let Some(p) = built.strip_prefix("ok:") else {
        panic!("{var} was not built (install libdapl-dev libdapl2): {built}");
    };
    PathBuf::from(p)
}

/// The cdylib cargo built with the tests: next to the test binary (`target/<profile>/deps/`;
/// `cargo test` does not copy it up), else the one `cargo build` put in `target/<profile>/`.
fn cdylib() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    let deps = exe.parent().expect("deps dir");
    let dir = deps.parent().expect("target dir");
    let so = [deps, dir]
        .iter()
        .map(|d| d.join("libdat_capi.so"))
        .find(|p| p.exists());
    so.unwrap_or_else(|| panic!("libdat_capi.so missing in {}", deps.display()))
}

fn conf(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dat-capi-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("dat.conf");
    let so = cdylib();
    std::fs::write(
        &path,
        format!(
            "rs-tcp u2.0 nonthreadsafe default {} dat.2.0 \"tcp-lo\" \"\"\n\
             rs-nowhere u2.0 nonthreadsafe default {} dat.2.0 \"no-such-ia\" \"\"\n",
            so.display(),
            so.display()
        ),
    )
    .expect("write dat.conf");
    path
}

fn run(exe: &PathBuf, conf: &PathBuf, ia: &str) -> (i32, String) {
    let mut child = Command::new(exe)
        .arg(ia)
        .env("DAT_OVERRIDE", conf)
        // libdat2 prints its provider-API trace (0x10) to stdout.
        .env("DAT_DBG_TYPE", "0x10")
        .env_remove("DAT_CONF")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut out = String::new();
            use std::io::Read;
            child
                .stdout
                .take()
                .expect("stdout")
                .read_to_string(&mut out)
                .expect("read");
            return (status.code().unwrap_or(-1), out);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("{} timed out", exe.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn open_rc(out: &str) -> u32 {
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("open "))
        .unwrap_or_else(|| panic!("no open line in {out:?}"));
    u32::from_str_radix(line.trim().trim_start_matches("0x"), 16).expect("hex rc")
}

#[test]
fn libdat2_loads_the_plugin_and_reports_a_clean_error_or_opens() {
    let conf = conf("probe");
    let (code, out) = run(&program("open_probe"), &conf, "rs-tcp");
    assert_eq!(code, 0, "{out}");
    let rc = open_rc(&out);
    if rc == 0 {
        // A transport provider is compiled in: the close must work too.
        assert!(
            out.contains("close 0\n") || out.contains("close 0x0"),
            "{out}"
        );
    } else {
        assert_eq!(
            rc & 0x3FFF_0000,
            0x000A_0000,
            "not PROVIDER_NOT_FOUND: {out}"
        );
    }
    // libdat2 loaded the library, our dat_provider_init registered the table under the
    // dat.conf key, and dat_provider_fini unregistered it before the unload.
    assert!(
        out.contains("dat_registry_add_provider (rs-tcp,2:0,0)"),
        "{out}"
    );
    assert!(out.contains("dat_registry_remove_provider"), "{out}");
}

#[test]
fn an_ia_unknown_to_our_registry_is_name_not_registered() {
    let conf = conf("nowhere");
    let (code, out) = run(&program("open_probe"), &conf, "rs-nowhere");
    assert_eq!(code, 0, "{out}");
    assert_eq!(open_rc(&out), 0x800A_0064, "{out}");
}

#[test]
fn a_name_missing_from_dat_conf_is_name_not_registered() {
    let conf = conf("missing");
    let (code, out) = run(&program("open_probe"), &conf, "not-in-dat-conf");
    assert_eq!(code, 0, "{out}");
    assert_eq!(open_rc(&out), 0x800A_0064, "{out}");
}

#[test]
fn the_c_example_consumer_runs_or_stops_at_open() {
    let conf = conf("consumer");
    let (code, out) = run(&program("consumer"), &conf, "rs-tcp");
    if code == 0 {
        assert!(out.contains("consumer: PASSED"), "{out}");
    } else {
        assert!(
            out.contains("dat_ia_open") && out.contains("failed: 0x800a"),
            "{out}"
        );
    }
}

/// The `p_memsz` of the ELF64 file's `PT_TLS` program header (0 without one).
fn tls_size(elf: &[u8]) -> u64 {
    let u16_at = |o: usize| u16::from_le_bytes(elf[o..o + 2].try_into().expect("2 bytes"));
    let u32_at = |o: usize| u32::from_le_bytes(elf[o..o + 4].try_into().expect("4 bytes"));
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().expect("8 bytes"));
    assert_eq!(&elf[..5], b"\x7fELF\x02", "not an ELF64 file");
    let phoff = usize::try_from(u64_at(0x20)).expect("offset");
    let (entsize, num) = (usize::from(u16_at(0x36)), usize::from(u16_at(0x38)));
    (0..num)
        .map(|i| phoff + i * entsize)
        .find(|&h| u32_at(h) == 7) // PT_TLS
        .map_or(0, |h| u64_at(h + 0x28))
}

/// libdat2 `dlopen`s the library: glibc gives a dlopened library static TLS (what makes a
/// TLS-descriptor access a two-instruction return, `.cargo/config.toml`) only if its
/// thread-locals fit in the 512 bytes of optional static TLS. A thread-local that grows it
/// past them puts `__tls_get_addr`-like calls back on every post and dequeue (the post
/// cache's 776 bytes of slots did, before they were boxed).
#[test]
fn the_library_tls_fits_static_tls() {
    let so = cdylib();
    let elf = std::fs::read(&so).expect("read the library");
    let size = tls_size(&elf);
    assert!(size > 0, "{} has no PT_TLS", so.display());
    assert!(
        size <= 512,
        "{}: {size} bytes of TLS, more than glibc's 512 of optional static TLS",
        so.display()
    );
}
