//! Evidence that carries a secret is refused before anything else is done
//! with it, and never stored or logged: the shapes callers and agents paste
//! by mistake into what they observed (a bearer token, a private key, a
//! card number, a wallet's seed phrase, `password=…`). Shapes, not
//! certainty: a detector that cries wolf on an operation id or a timestamp
//! would make Diagnose useless, so each shape is narrow, and the tests hold
//! both sides.

/// What kind of secret a text carries (named in the refusal; the secret
/// itself never is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretKind {
    PrivateKey,
    IdemdToken,
    BearerToken,
    CloudAccessKey,
    SourceHostToken,
    ChatToken,
    PaymentApiKey,
    Jwt,
    CardNumber,
    SeedPhrase,
    PasswordAssignment,
}

impl SecretKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SecretKind::PrivateKey => "a private key",
            SecretKind::IdemdToken => "an idemd token",
            SecretKind::BearerToken => "a bearer token",
            SecretKind::CloudAccessKey => "a cloud access key",
            SecretKind::SourceHostToken => "a source-hosting token",
            SecretKind::ChatToken => "a chat service token",
            SecretKind::PaymentApiKey => "a payment API key",
            SecretKind::Jwt => "a JSON Web Token",
            SecretKind::CardNumber => "a card number",
            SecretKind::SeedPhrase => "a seed phrase",
            SecretKind::PasswordAssignment => "a password or secret value",
        }
    }
}

/// The BIP-39 English word list (CC0, as vendored by the rust-bip39 crate):
/// twelve or more of its words in a row are a wallet's seed phrase.
const SEED_WORDS: &str = include_str!("bip39-english.txt");
/// The shortest seed phrase.
const SEED_PHRASE_WORDS: usize = 12;

/// Key names whose value is a secret when one follows (`name=value`,
/// `name: value`).
const SECRET_NAMES: [&str; 9] = [
    "password",
    "passwd",
    "secret",
    "api_key",
    "apikey",
    "client_secret",
    "private_key",
    "access_token",
    "refresh_token",
];

/// The first secret `text` carries, if any.
pub fn find_secret(text: &str) -> Option<SecretKind> {
    let lower = text.to_ascii_lowercase();
    if lower.contains("-----begin") && lower.contains("private key") {
        return Some(SecretKind::PrivateKey);
    }
    if bearer_token(&lower) {
        return Some(SecretKind::BearerToken);
    }
    if secret_assignment(&lower) {
        return Some(SecretKind::PasswordAssignment);
    }
    if let Some(kind) = words(text).find_map(token_shape) {
        return Some(kind);
    }
    if card_number(text) {
        return Some(SecretKind::CardNumber);
    }
    if seed_phrase(&lower) {
        return Some(SecretKind::SeedPhrase);
    }
    None
}

/// Runs of the characters tokens are made of.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|character: char| {
        !(character.is_ascii_alphanumeric()
            || matches!(character, '_' | '-' | '.' | '/' | '+' | '='))
    })
    .filter(|word| !word.is_empty())
}

fn all(text: &str, allowed: impl Fn(char) -> bool) -> bool {
    !text.is_empty() && text.chars().all(allowed)
}

fn alphanumeric(character: char) -> bool {
    character.is_ascii_alphanumeric()
}

/// A token whose prefix names what it is.
fn token_shape(word: &str) -> Option<SecretKind> {
    let with_prefix = |prefixes: &[&str], shortest: usize| {
        prefixes.iter().any(|prefix| {
            word.strip_prefix(prefix).is_some_and(|rest| {
                rest.len() >= shortest && all(rest, |c| c.is_ascii_alphanumeric() || c == '_')
            })
        })
    };
    if word
        .strip_prefix("idem_")
        .is_some_and(|rest| rest.len() >= 32 && all(rest, |c| c.is_ascii_hexdigit()))
    {
        return Some(SecretKind::IdemdToken);
    }
    let cloud_key = ["AKIA", "ASIA"].iter().any(|prefix| {
        word.strip_prefix(prefix).is_some_and(|rest| {
            rest.len() == 16 && all(rest, |c| c.is_ascii_uppercase() || c.is_ascii_digit())
        })
    });
    if cloud_key {
        return Some(SecretKind::CloudAccessKey);
    }
    if with_prefix(
        &[
            "ghp_",
            "gho_",
            "ghu_",
            "ghs_",
            "ghr_",
            "github_pat_",
            "glpat-",
        ],
        20,
    ) {
        return Some(SecretKind::SourceHostToken);
    }
    let chat = ["xoxb-", "xoxa-", "xoxp-", "xoxr-", "xoxs-"]
        .iter()
        .any(|prefix| {
            word.strip_prefix(prefix)
                .is_some_and(|rest| rest.len() >= 10)
        });
    if chat {
        return Some(SecretKind::ChatToken);
    }
    if with_prefix(&["sk_live_", "sk_test_", "rk_live_", "rk_test_"], 16) {
        return Some(SecretKind::PaymentApiKey);
    }
    if jwt(word) {
        return Some(SecretKind::Jwt);
    }
    None
}

/// `header.payload.signature`, base64url, the header a JSON object.
fn jwt(word: &str) -> bool {
    let parts: Vec<&str> = word.split('.').collect();
    let base64url = |part: &str| all(part, |c| alphanumeric(c) || matches!(c, '-' | '_'));
    parts.len() == 3
        && parts[0].starts_with("eyJ")
        && parts.iter().all(|part| part.len() >= 10 && base64url(part))
}

/// `Bearer <token>` (an Authorization header pasted whole).
fn bearer_token(lower: &str) -> bool {
    lower.match_indices("bearer ").any(|(at, found)| {
        let token: String = lower[at + found.len()..]
            .chars()
            .take_while(|c| {
                c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '~' | '+' | '/' | '=' | '-')
            })
            .collect();
        token.len() >= 16
    })
}

/// `password=…`, `"client_secret": "…"` and the like, with a value.
fn secret_assignment(lower: &str) -> bool {
    SECRET_NAMES.iter().any(|name| {
        lower.match_indices(name).any(|(at, _)| {
            let preceded_by_word = lower[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric());
            if preceded_by_word {
                return false;
            }
            let rest = lower[at + name.len()..].trim_start_matches(['"', '\'', ' ']);
            let Some(value) = rest.strip_prefix(['=', ':']) else {
                return false;
            };
            let value: String = value
                .trim_start_matches(['"', '\'', ' '])
                .chars()
                .take_while(|c| !c.is_whitespace() && !matches!(c, '"' | '\'' | ',' | '}'))
                .collect();
            value.len() >= 6
        })
    })
}

/// 15 to 19 digits (alone, or in groups of four) with a card network's
/// first digit and a valid Luhn check. Shorter runs (timestamps in
/// milliseconds, fences) are not taken for cards.
fn card_number(text: &str) -> bool {
    let mut digits = String::new();
    let flush = |digits: &mut String| {
        let found = (15..=19).contains(&digits.len())
            && matches!(digits.as_bytes()[0], b'3'..=b'6')
            && luhn(digits);
        digits.clear();
        found
    };
    let characters: Vec<char> = text.chars().collect();
    for (index, character) in characters.iter().enumerate() {
        if character.is_ascii_digit() {
            digits.push(*character);
            continue;
        }
        // A space or dash between groups of four digits is part of it.
        let between_groups = matches!(character, ' ' | '-')
            && !digits.is_empty()
            && digits.len().is_multiple_of(4)
            && characters.get(index + 1).is_some_and(char::is_ascii_digit);
        if between_groups {
            continue;
        }
        if flush(&mut digits) {
            return true;
        }
    }
    flush(&mut digits)
}

fn luhn(digits: &str) -> bool {
    let sum: u32 = digits
        .bytes()
        .rev()
        .enumerate()
        .map(|(position, digit)| {
            let value = u32::from(digit - b'0');
            if position % 2 == 1 {
                let doubled = value * 2;
                if doubled > 9 { doubled - 9 } else { doubled }
            } else {
                value
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// Twelve or more words of the BIP-39 list in a row.
fn seed_phrase(lower: &str) -> bool {
    let mut run = 0;
    for word in lower.split(|c: char| !c.is_ascii_lowercase()) {
        if word.is_empty() {
            continue;
        }
        if SEED_WORDS.lines().any(|listed| listed == word) {
            run += 1;
            if run >= SEED_PHRASE_WORDS {
                return true;
            }
        } else {
            run = 0;
        }
    }
    false
}

/// Refuses evidence any of whose fields carries a secret: the first such
/// field and the kind, never the value.
pub fn refuse_secrets(fields: &[(&'static str, &str)]) -> crate::error::Result<()> {
    for (field, text) in fields {
        if let Some(kind) = find_secret(text) {
            return Err(crate::error::Error::EvidenceCarriesSecret { field, kind });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_shape_of_secret_is_found_and_named() {
        let cases = [
            (
                "here is our key -----BEGIN RSA PRIVATE KEY-----\nMIIEow...",
                SecretKind::PrivateKey,
            ),
            (
                "token idem_0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0",
                SecretKind::IdemdToken,
            ),
            (
                "sent Authorization: Bearer abcdefABCDEF0123456789xyz",
                SecretKind::BearerToken,
            ),
            ("key AKIAIOSFODNN7EXAMPLE used", SecretKind::CloudAccessKey),
            (
                "pushed with ghp_0123456789abcdefghijABCDEFGHIJ012345",
                SecretKind::SourceHostToken,
            ),
            ("webhook xoxb-123456789012-abcdef", SecretKind::ChatToken),
            (
                "charged with sk_live_4eC39HqLyjWDarjtT1zdp7dc",
                SecretKind::PaymentApiKey,
            ),
            (
                "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                SecretKind::Jwt,
            ),
            ("card 4242 4242 4242 4242 declined", SecretKind::CardNumber),
            ("card 4111111111111111 declined", SecretKind::CardNumber),
            (
                "wallet: abandon ability able about above absent absorb abstract absurd abuse access accident",
                SecretKind::SeedPhrase,
            ),
            (
                "db url has password=hunter22x",
                SecretKind::PasswordAssignment,
            ),
            (
                r#"{"client_secret": "s3cr3t-value"}"#,
                SecretKind::PasswordAssignment,
            ),
        ];
        for (text, kind) in cases {
            assert_eq!(find_secret(text), Some(kind), "{text}");
        }
    }

    #[test]
    fn what_callers_honestly_report_is_not_taken_for_a_secret() {
        let benign = [
            "timeout after 30s before any response, operation 0190f0e4-7c1d-7b3e-9a55-3c2d1e0f4a5b",
            "got FAILED_PRECONDITION IDEMPOTENCY_KEY_REUSED at 1796299574708 (fence 4211)",
            "retried with key order-1001-retry-3 and a fresh claim_token",
            "payload {\"amount\": 1200, \"currency\": \"EUR\", \"customer\": \"c-17\"}",
            "the provider reference is ch_3MqBxz2eZvKYlo2C0u8k1a2b",
            "trace 4bf92f3577b34da6a3ce929d0e0e4736, span 00f067aa0ba902b7",
            "we reset the password policy yesterday; the secret rotation is monthly",
            "the bearer of bad news: an account was charged twice above the limit",
            "nanoseconds 1796299574708123456 and order 1234567890123456 (not Luhn)",
        ];
        for text in benign {
            assert_eq!(find_secret(text), None, "{text}");
        }
    }

    #[test]
    fn the_seed_word_list_is_bip39s() {
        let words: Vec<&str> = SEED_WORDS.lines().collect();
        assert_eq!(words.len(), 2048);
        assert_eq!((words[0], words[2047]), ("abandon", "zoo"));
        // Eleven words are not a seed phrase.
        let eleven = words[..11].join(" ");
        assert_eq!(find_secret(&eleven), None);
    }
}
