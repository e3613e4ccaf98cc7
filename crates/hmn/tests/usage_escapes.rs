//! Usage errors show an argument's control characters as `\xNN` (docs/security.md, "Nothing from
//! outside reaches the terminal raw"): clap's own text drops them — `--sort $'a\e]2;pwn\ab'` read
//! `invalid value 'ab'` — which hid what was typed without escaping anything.

use crate::util::{Bed, stderr};

#[test]
fn a_usage_error_shows_the_arguments_control_characters_escaped() {
    let bed = Bed::new();
    for (args, shown) in [
        (
            vec!["ps", "--sort", "a\x1b]2;pwn\x07b"],
            "invalid value 'a\\x1b]2;pwn\\x07b' for '--sort <SORT>'",
        ),
        (
            vec!["ps", "--pid", "1\x1b[31m"],
            "invalid value '1\\x1b[31m' for '--pid <PID>'",
        ),
        (
            vec!["bad\x1b]2;x\x07"],
            "unrecognized subcommand 'bad\\x1b]2;x\\x07'",
        ),
        (
            vec!["run", "--interval", "1\x1b]52;c;AAAA\x07s", "--", "true"],
            "invalid value '1\\x1b]52;c;AAAA\\x07s' for '--interval <DURATION>'",
        ),
        (
            vec!["ps", "--sort", "a\u{9b}31mb"],
            "invalid value 'a\\x9b31mb' for '--sort <SORT>'",
        ),
    ] {
        let o = bed.run(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e:?}");
        assert!(o.stdout.is_empty(), "{args:?}: {:?}", o.stdout);
        assert_eq!(e.lines().count(), 1, "{args:?}: {e:?}");
        assert!(
            e.starts_with("hmn: ") && e.contains(shown),
            "{args:?}: {e:?}"
        );
        let body = e.strip_suffix('\n').unwrap_or(&e);
        assert!(
            !body
                .chars()
                .any(|c| c.is_control() || ('\u{80}'..='\u{9f}').contains(&c)),
            "a control character reached the terminal: {e:?}"
        );
    }
}
