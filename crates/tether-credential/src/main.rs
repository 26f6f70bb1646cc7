//! `tether-credential`: see the library's documentation.

fn main() -> std::process::ExitCode {
    tether_credential::main()
}
