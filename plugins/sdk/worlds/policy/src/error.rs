//! Conveniences for [`PluginError`].

use crate::bindings::refract::plugin::types::PluginError;

impl PluginError {
    /// An `invalid-config` error: the config is unusable; the text says which key and why.
    pub fn invalid_config(message: impl Into<String>) -> Self {
        Self::InvalidConfig(message.into())
    }

    /// An `unsupported` error: the plugin does not support what was asked of it.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::Unsupported(message.into())
    }

    /// A `failed` error: anything else.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }

    /// The error's text, whatever its case.
    pub fn message(&self) -> &str {
        match self {
            Self::InvalidConfig(message) | Self::Unsupported(message) | Self::Failed(message) => {
                message
            }
        }
    }
}
