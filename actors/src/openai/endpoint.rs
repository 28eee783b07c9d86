//! The base URL as given, read once at `build`: where each call is posted,
//! and how that address is shown (in errors, `Debug`, `base_url`) with its
//! credentials left out.

use reqwest::Url;

use super::error::OpenAiConfigError;

/// The path every call is posted to, under the API root.
const CHAT_PATH: &str = "/chat/completions";

/// Where an adapter posts, read from its base URL.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// The API root as shown (no trailing `/`, no credentials).
    pub(crate) root: String,
    /// `{root}/chat/completions`, the query kept: what is posted to. It
    /// keeps any `user:password@` (reqwest sends it as basic auth).
    pub(crate) url: Url,
    /// `url` as shown: no credentials, and the value of a query parameter
    /// that names a key, token or secret replaced by `<redacted>`.
    pub(crate) shown: String,
    /// The URL carries `user:password@`.
    pub(crate) has_credentials: bool,
}

/// Reads a base URL: `http` or `https`, no fragment. A query (Azure's
/// `?api-version=`) is kept after the chat path, not written before it;
/// a URL that already ends in `/chat/completions` (the endpoint, as some
/// consoles show it) names its own root.
pub(crate) fn endpoint(base_url: &str, tls: bool) -> Result<Endpoint, OpenAiConfigError> {
    let given = base_url.trim();
    let invalid = |reason: String| OpenAiConfigError::InvalidBaseUrl {
        url: shown(given),
        reason,
    };
    let mut url = Url::parse(given).map_err(|e| invalid(e.to_string()))?;
    match url.scheme() {
        "http" => {}
        "https" if tls => {}
        "https" => return Err(OpenAiConfigError::TlsNotEnabled { url: shown(given) }),
        other => {
            return Err(invalid(format!(
                "the scheme `{other}` is not http or https"
            )));
        }
    }
    if url.fragment().is_some() {
        return Err(invalid(
            "it has a fragment (`#…`), which is never sent to a server".to_owned(),
        ));
    }
    let path = url.path().trim_end_matches('/');
    let root_path = path.strip_suffix(CHAT_PATH).unwrap_or(path).to_owned();
    let has_credentials = !url.username().is_empty() || url.password().is_some();
    url.set_path(&format!("{root_path}{CHAT_PATH}"));
    let mut root = Url::clone(&url);
    root.set_path(&root_path);
    let mut root = shown_url(&root);
    if !root.contains('?') {
        root.truncate(root.trim_end_matches('/').len());
    }
    Ok(Endpoint {
        root,
        shown: shown_url(&url),
        url,
        has_credentials,
    })
}

/// `text` as shown when it is not a URL yet: a parsed one has its
/// credentials and secret query values left out; one that does not parse
/// is cut before any `@` (where credentials end) and its whole query left
/// out (its names cannot be read apart, so none is trusted).
pub(crate) fn shown(text: &str) -> String {
    match Url::parse(text) {
        Ok(url) => shown_url(&url),
        Err(_) => {
            let text = match text.rfind('@') {
                Some(at) => format!("<redacted>{}", &text[at..]),
                None => text.to_owned(),
            };
            match text.find('?') {
                Some(query) => format!("{}?<redacted>", &text[..query]),
                None => text,
            }
        }
    }
}

/// `url` without credentials, and with the value of each query parameter
/// whose name says it holds a secret replaced.
pub(crate) fn shown_url(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    if shown.query().is_some() {
        let pairs: Vec<(String, String)> = shown
            .query_pairs()
            .map(|(name, value)| {
                let value = if is_secret(&name) {
                    "<redacted>".to_owned()
                } else {
                    value.into_owned()
                };
                (name.into_owned(), value)
            })
            .collect();
        shown.query_pairs_mut().clear().extend_pairs(pairs);
    }
    shown.to_string()
}

/// A query parameter's name that says it carries a credential (`key`,
/// `api-key`, `access_token`, `sig`, `pwd`, …), or is one: Azure
/// Functions' `code` (a function key).
fn is_secret(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    let said = [
        "key",
        "token",
        "secret",
        "sig",
        "password",
        "passwd",
        "pwd",
        "pass",
        "auth",
        "credential",
    ]
    .iter()
    .any(|word| name.contains(word));
    said || name == "code"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(url: &str) -> Endpoint {
        match endpoint(url, true) {
            Ok(endpoint) => endpoint,
            Err(e) => panic!("{url}: {e}"),
        }
    }

    #[test]
    fn the_chat_path_goes_before_the_query() {
        let azure =
            read("https://r.openai.azure.com/openai/deployments/gpt-4o?api-version=2024-10-21");
        assert_eq!(
            azure.url.as_str(),
            "https://r.openai.azure.com/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
        );
        assert_eq!(
            azure.root,
            "https://r.openai.azure.com/openai/deployments/gpt-4o?api-version=2024-10-21"
        );
        // The old join wrote it after the query.
        assert!(!azure.url.as_str().contains("2024-10-21/chat"));
    }

    #[test]
    fn an_endpoint_given_whole_names_its_root() {
        let whole = read("https://h/openai/deployments/x/chat/completions/?api-version=1");
        assert_eq!(
            whole.url.as_str(),
            "https://h/openai/deployments/x/chat/completions?api-version=1"
        );
        assert_eq!(whole.root, "https://h/openai/deployments/x?api-version=1");
        let plain = read("http://127.0.0.1:8080/v1/");
        assert_eq!(
            plain.url.as_str(),
            "http://127.0.0.1:8080/v1/chat/completions"
        );
        assert_eq!(plain.root, "http://127.0.0.1:8080/v1");
        assert_eq!(read("http://h").root, "http://h");
        assert_eq!(read("http://h").url.as_str(), "http://h/chat/completions");
    }

    #[test]
    fn credentials_are_sent_but_never_shown() {
        let basic = read("https://alice:s3cret@llm.example.com/v1?key=abc&api-version=2");
        assert!(basic.has_credentials);
        assert_eq!(basic.url.password(), Some("s3cret"));
        for shown in [&basic.root, &basic.shown] {
            assert!(
                !shown.contains("s3cret") && !shown.contains("alice"),
                "{shown}"
            );
            assert!(!shown.contains("abc"), "{shown}");
            assert!(shown.contains("api-version=2"), "{shown}");
        }
        assert!(!read("http://h/v1").has_credentials);
        let Err(e) = endpoint("http://bob:pw@ho st/v1", true) else {
            panic!("a space in the host parsed");
        };
        assert!(!e.to_string().contains("pw"), "{e}");
    }

    /// A base URL that does not parse kept its query's secret whole in
    /// the refusal and in the builder's `Debug`; Azure Functions' `code`
    /// (a function key) and `pwd` were shown as plain values.
    #[test]
    fn secrets_are_left_out_of_a_url_that_does_not_parse_and_of_more_names() {
        for (given, secret) in [
            ("http://my host/v1?api-key=S3", "S3"),
            ("http://u:p@h o/v1?key=S4", "S4"),
        ] {
            let shown = shown(given);
            assert!(!shown.contains(secret), "{shown}");
            assert!(shown.ends_with("?<redacted>"), "{shown}");
        }
        let read = read("https://fn.example.net/api?code=FNKEY&pwd=PW&region=eu");
        assert!(
            !read.shown.contains("FNKEY") && !read.shown.contains("PW"),
            "{}",
            read.shown
        );
        assert!(read.shown.contains("region=eu"), "{}", read.shown);
    }

    #[test]
    fn a_fragment_or_another_scheme_is_refused() {
        for url in ["http://h/v1#x", "ftp://h/v1", "not a url"] {
            assert!(
                matches!(
                    endpoint(url, true),
                    Err(OpenAiConfigError::InvalidBaseUrl { .. })
                ),
                "{url}"
            );
        }
        assert!(matches!(
            endpoint("https://h/v1", false),
            Err(OpenAiConfigError::TlsNotEnabled { .. })
        ));
    }
}
