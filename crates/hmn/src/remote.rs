//! A model named on the command line by where it lives rather than by a path: `hf:ORG/REPO`
//! (a Hugging Face Hub repository) or an `https://` URL, its headers read by range requests
//! (`hypomnesis::estimate::hub`). `hmn fits` and `hmn pick --need` take the same spellings.

use hypomnesis::estimate::model::OpenedModel;

/// A model on a Hub or at a URL (`HF_ENDPOINT`, `HF_TOKEN`, `HMN_HUB_TIMEOUT`); `None` for
/// anything else.
#[cfg(feature = "hub")]
pub fn model(text: &str) -> anyhow::Result<Option<OpenedModel>> {
    use hypomnesis::estimate::hub;
    let Some(r) = hub::Remote::parse(text)? else {
        return Ok(None);
    };
    Ok(Some(hub::open(&r, &hub::HubOptions::from_env())?.model))
}

#[cfg(not(feature = "hub"))]
pub fn model(text: &str) -> anyhow::Result<Option<OpenedModel>> {
    if ["hf:", "https://", "http://"]
        .iter()
        .any(|p| text.starts_with(p))
    {
        anyhow::bail!(
            "{}: this hmn was built without the `hub` feature (models from a Hub or a URL)",
            crate::format::sanitize(text)
        );
    }
    Ok(None)
}
