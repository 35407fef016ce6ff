//! The sandbox image (SPEC §5): explicit `sandbox_image` → `Dockerfile.odek`
//! in the working directory (built once, tagged by content hash) → the pinned
//! default read from the embedded `default.Dockerfile`.

mod build;

pub use crate::image_ref::{ImageRef, ImageRefError};
pub(crate) use build::build_context;
pub(crate) use build::read_dockerfile;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::advice::Surface;
use crate::config::{Settings, Source};
use crate::engine::{DockerApi, EngineError, ImageInfo, ProgressSink};

/// The embedded `default.Dockerfile`: the single source of truth of the
/// pinned default image (SPEC §5). Dependabot bumps it; nothing else in the
/// code carries the digest.
pub const DEFAULT_DOCKERFILE: &str = include_str!("default.Dockerfile");

/// The file name looked for in the working directory.
pub(crate) const DOCKERFILE_ODEK: &str = "Dockerfile.odek";

/// Reads the image reference from a Dockerfile whose only instruction is
/// `FROM <ref>` (comments and blank lines allowed). Errors name the problem.
pub(crate) fn from_of_dockerfile(text: &str) -> Result<ImageRef, String> {
    let mut instructions = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'));
    let first = instructions.next().ok_or("no instruction")?;
    if instructions.next().is_some() {
        return Err("more than one instruction".into());
    }
    let mut words = first.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (Some(kw), Some(r), None) if kw.eq_ignore_ascii_case("FROM") => {
            ImageRef::parse(r).map_err(|e| e.to_string())
        }
        _ => Err(format!("expected `FROM <reference>`, found {first:?}")),
    }
}

/// The pinned default image reference (SPEC §5).
pub fn pinned_default() -> ImageRef {
    from_of_dockerfile(DEFAULT_DOCKERFILE)
        .expect("default.Dockerfile holds one valid FROM (checked by tests)")
}

/// Where the image comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ImageSource {
    /// `sandbox_image` from some source.
    Explicit {
        /// Which source.
        source: Source,
    },
    /// `Dockerfile.odek` in the working directory.
    Dockerfile {
        /// The file.
        path: PathBuf,
        /// Lowercase hex SHA-256 of the file.
        sha256: String,
    },
    /// The pinned default.
    PinnedDefault,
}

/// The image decision of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ImagePlan {
    /// The reference (for a Dockerfile: `odek-sandbox:<24 hex>`).
    pub reference: ImageRef,
    /// Where it comes from.
    pub source: ImageSource,
}

impl ImagePlan {
    /// Chooses the image for `settings` (SPEC §5 order). With the sandbox
    /// off, `Dockerfile.odek` is not looked at (nothing is built). Errors: a
    /// `Dockerfile.odek` that is not a readable regular file.
    pub(crate) fn choose(settings: &Settings) -> Result<ImagePlan, ImageError> {
        if let Some(img) = &settings.image {
            let reference = ImageRef::parse(&img.value).map_err(ImageError::InvalidReference)?;
            return Ok(ImagePlan {
                reference,
                source: ImageSource::Explicit {
                    source: img.source.clone(),
                },
            });
        }
        if settings.mode.value == crate::config::SandboxMode::Off {
            return Ok(ImagePlan {
                reference: pinned_default(),
                source: ImageSource::PinnedDefault,
            });
        }
        let path = settings.workdir.join(DOCKERFILE_ODEK);
        // Like odek.json: the project's own regular file, never a link to
        // something elsewhere, a pipe or a device (what is approved must be
        // what is built); read once through one descriptor.
        match crate::safe_open::read_in(
            &settings.workdir,
            DOCKERFILE_ODEK,
            crate::safe_open::MAX_DOCKERFILE_BYTES,
        ) {
            Ok(Some(bytes)) => {
                let digest = Sha256::digest(&bytes);
                let tag = format!("odek-sandbox:{}", hex::encode(&digest[..12]));
                Ok(ImagePlan {
                    reference: ImageRef::parse(&tag).map_err(ImageError::InvalidReference)?,
                    source: ImageSource::Dockerfile {
                        path,
                        sha256: hex::encode(digest),
                    },
                })
            }
            Ok(None) => Ok(ImagePlan {
                reference: pinned_default(),
                source: ImageSource::PinnedDefault,
            }),
            Err(e) => Err(ImageError::DockerfileUnusable {
                path,
                reason: e.to_string(),
            }),
        }
    }
}

/// Image errors. Class per SPEC §6.3: a failed pull is `image-unavailable`;
/// everything else is `config` (bad reference, build failure, digest
/// mismatch) or comes from the engine.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ImageError {
    /// The reference is invalid (config).
    #[error(transparent)]
    InvalidReference(ImageRefError),
    /// The pull failed: not found, registry unreachable (image-unavailable).
    #[error("{}", pull_failed_text(.reference, .message, Surface::Cli))]
    PullFailed {
        /// The reference pulled.
        reference: String,
        /// The registry's or daemon's message.
        message: String,
    },
    /// The image's `RepoDigests` do not contain the pinned digest (config).
    #[error("image {reference} is pinned to {digest} but the local image does not carry that digest (RepoDigests: {found}); remove the local image and pull it by digest")]
    DigestMismatch {
        /// The reference.
        reference: String,
        /// The pinned digest.
        digest: String,
        /// What the image carries.
        found: String,
    },
    /// `Dockerfile.odek` could not be built (config).
    #[error("building {} failed: {message}; fix the Dockerfile (try `docker build -f Dockerfile.odek .`)", crate::text::shown(.path))]
    BuildFailed {
        /// The Dockerfile.
        path: PathBuf,
        /// The builder's message.
        message: String,
    },
    /// `Dockerfile.odek` is not the file that was resolved and approved: its
    /// content hashes differently now, or it is gone, a symlink or not a
    /// regular file (config); nothing was built.
    #[error("{} changed since it was resolved and approved: {reason}; nothing was built; run odek again to review it", crate::text::shown(.path))]
    DockerfileChanged {
        /// The Dockerfile.
        path: PathBuf,
        /// What changed.
        reason: String,
    },
    /// `Dockerfile.odek` is a symlink, not a regular file, or unreadable
    /// (config); nothing was built.
    #[error("{}", dockerfile_unusable_text(.path, .reason, Surface::Cli))]
    DockerfileUnusable {
        /// The Dockerfile.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The engine failed while inspecting.
    #[error(transparent)]
    Engine(EngineError),
}

impl ImageError {
    /// The message with its advice in `surface`'s words (`Display` is
    /// [`Surface::Cli`]'s).
    pub fn render(&self, surface: Surface) -> String {
        match self {
            ImageError::PullFailed { reference, message } => {
                pull_failed_text(reference, message, surface)
            }
            ImageError::DockerfileUnusable { path, reason } => {
                dockerfile_unusable_text(path, reason, surface)
            }
            other => other.to_string(),
        }
    }
}

fn pull_failed_text(reference: &str, message: &str, surface: Surface) -> String {
    format!(
        "image {reference} cannot be pulled: {message}; pull or build it yourself (`docker pull {reference}`), or choose another with {}",
        surface.setting(crate::config::names::sandbox_image)
    )
}

fn dockerfile_unusable_text(path: &Path, reason: &str, surface: Surface) -> String {
    format!(
        "{} {reason}; Dockerfile.odek must be a readable regular file in the project directory (or choose an image with {})",
        crate::text::shown(path),
        surface.setting(crate::config::names::sandbox_image)
    )
}

/// Label put on images odek builds.
pub(crate) const IMAGE_LABEL: &str = "dev.odek.image";

/// Label marking an image this user's odek built from `Dockerfile.odek`:
/// HMAC-SHA256 (lowercase hex) under the launch key of `$ODEK_HOME`
/// ([`crate::secret::Secret`], domain [`BUILD_MAC_DOMAIN`]) over the
/// Dockerfile's SHA-256 in lowercase hex. Anyone can tag an image
/// `odek-sandbox:<hash>` (a Compose file can build one); only an image
/// carrying this mark is reused.
pub const BUILD_MAC_LABEL: &str = "dev.odek.build-mac";

/// Domain of [`BUILD_MAC_LABEL`].
pub const BUILD_MAC_DOMAIN: &str = "odek.image/1";

/// True when `info` carries a [`BUILD_MAC_LABEL`] made with the launch key
/// of `odek_home` over `sha256` (false without a key, a label, or with
/// another key's).
fn built_by_this_user(odek_home: &Path, sha256: &str, info: &ImageInfo) -> bool {
    let Some(mac) = info.labels.get(BUILD_MAC_LABEL) else {
        return false;
    };
    matches!(crate::secret::Secret::load(odek_home), Ok(Some(key))
        if key.verify(BUILD_MAC_DOMAIN, &[sha256.as_bytes()], mac))
}

/// Makes sure the planned image exists locally and returns its ID
/// (`sha256:…`): inspect; else build (`Dockerfile.odek`) or pull (others);
/// then check a pinned digest against `RepoDigests` (SPEC §5, §6.1).
///
/// For `Dockerfile.odek`, an image already tagged `odek-sandbox:<hash>` is
/// reused only when it carries this user's [`BUILD_MAC_LABEL`] (the key of
/// `odek_home`); otherwise it is built again and the tag moves. The build
/// reads the Dockerfile once without following a symlink, refuses it unless
/// its SHA-256 is the plan's (the approved one) — [`ImageError::DockerfileChanged`]
/// — and sends exactly those bytes ([`build_context`]); `odek_home` is never
/// sent.
pub(crate) async fn ensure(
    engine: &dyn DockerApi,
    plan: &ImagePlan,
    odek_home: &Path,
    progress: ProgressSink<'_>,
) -> Result<crate::engine::ImageInfo, ImageError> {
    let create_ref = plan.reference.create_ref();
    let mut info = engine
        .inspect_image(&create_ref)
        .await
        .map_err(ImageError::Engine)?;
    if let (ImageSource::Dockerfile { sha256, .. }, Some(found)) = (&plan.source, &info) {
        if !built_by_this_user(odek_home, sha256, found) {
            progress(&format!(
                "{create_ref} exists but was not built by this user's odek (no valid {BUILD_MAC_LABEL} label): building it again"
            ));
            info = None;
        }
    }
    if info.is_none() {
        match &plan.source {
            ImageSource::Dockerfile { path, sha256 } => {
                let dir = path.parent().unwrap_or(Path::new("."));
                let changed = |reason: String| ImageError::DockerfileChanged {
                    path: path.clone(),
                    reason,
                };
                let bytes = read_dockerfile(dir, DOCKERFILE_ODEK).map_err(changed)?;
                let now = hex::encode(Sha256::digest(&bytes));
                if now != *sha256 {
                    return Err(changed(format!(
                        "its SHA-256 is now {}…, the approved one {}…",
                        &now[..12],
                        &sha256[..12.min(sha256.len())]
                    )));
                }
                let key = crate::secret::Secret::load_or_create(odek_home).map_err(|e| {
                    ImageError::BuildFailed {
                        path: path.clone(),
                        message: format!("cannot mark the image as this user's: {e}"),
                    }
                })?;
                progress(&format!(
                    "building {} as {create_ref}",
                    crate::text::shown(path)
                ));
                let tar = build_context(
                    dir,
                    DOCKERFILE_ODEK,
                    &bytes,
                    std::slice::from_ref(&odek_home.to_path_buf()),
                )
                .map_err(|e| ImageError::BuildFailed {
                    path: path.clone(),
                    message: e,
                })?;
                let labels = BTreeMap::from([
                    (IMAGE_LABEL.to_string(), "true".to_string()),
                    (
                        BUILD_MAC_LABEL.to_string(),
                        key.mac(BUILD_MAC_DOMAIN, &[sha256.as_bytes()]),
                    ),
                ]);
                engine
                    .build_image(tar, DOCKERFILE_ODEK, &create_ref, &labels, progress)
                    .await
                    .map_err(|e| {
                        if e.is_unreachable() {
                            ImageError::Engine(e)
                        } else {
                            ImageError::BuildFailed {
                                path: path.clone(),
                                message: e.message,
                            }
                        }
                    })?;
            }
            _ => {
                progress(&format!("pulling {create_ref}"));
                engine
                    .pull_image(&create_ref, progress)
                    .await
                    .map_err(|e| {
                        // A daemon that stops answering is not an image problem.
                        if e.is_unreachable() && e.kind != crate::engine::EngineErrorKind::Timeout {
                            ImageError::Engine(e)
                        } else {
                            ImageError::PullFailed {
                                reference: create_ref.clone(),
                                message: e.message,
                            }
                        }
                    })?;
            }
        }
        info = engine
            .inspect_image(&create_ref)
            .await
            .map_err(ImageError::Engine)?;
        if let (ImageSource::Dockerfile { path, sha256 }, Some(found)) = (&plan.source, &info) {
            if !built_by_this_user(odek_home, sha256, found) {
                return Err(ImageError::BuildFailed {
                    path: path.clone(),
                    message: format!(
                        "right after the build, {create_ref} is an image this user's odek did not build (the tag was moved)"
                    ),
                });
            }
        }
    }
    let info = info.ok_or_else(|| ImageError::PullFailed {
        reference: create_ref.clone(),
        message: "the image is still missing after the pull".into(),
    })?;
    if let Some(digest) = &plan.reference.digest {
        if !info
            .repo_digests
            .iter()
            .any(|d| plan.reference.matches_repo_digest(d))
        {
            return Err(ImageError::DigestMismatch {
                reference: plan.reference.original.clone(),
                digest: digest.clone(),
                found: if info.repo_digests.is_empty() {
                    "none".into()
                } else {
                    info.repo_digests.join(", ")
                },
            });
        }
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_dockerfile_has_one_pinned_from() {
        let r = pinned_default();
        assert_eq!(r.tag.as_deref(), Some("3.22"));
        assert_eq!(r.repository, "library/alpine");
        let d = r.digest.as_deref().expect("pinned");
        assert!(d.starts_with("sha256:") && d.len() == 71);
    }

    #[test]
    fn from_parser_refuses_more_or_less_than_one_from() {
        assert!(from_of_dockerfile("").is_err());
        assert!(from_of_dockerfile("# only a comment\n").is_err());
        assert!(from_of_dockerfile("FROM alpine\nRUN true\n").is_err());
        assert!(from_of_dockerfile("FROM alpine AS x\n").is_err());
        assert!(from_of_dockerfile("RUN true\n").is_err());
        assert_eq!(
            from_of_dockerfile("# c\n\nfrom alpine:3\n")
                .expect("ok")
                .original,
            "alpine:3"
        );
    }
}

/// What the daemon and the registry say now of a plan's image, without
/// pulling or building it ([`crate::Client::image_check`]): for a server
/// that launches lazily (`odek mcp`) to tell its agent at start whether the
/// first launch can get its image, instead of promising.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ImageCheck {
    /// The daemon has it.
    Present {
        /// The image reference.
        reference: String,
    },
    /// The daemon lacks it and its registry serves it: the first launch
    /// pulls it.
    Pullable {
        /// The image reference.
        reference: String,
        /// The manifest's digest the registry answered (`sha256:…`).
        digest: String,
    },
    /// The first launch builds it from `Dockerfile.odek`.
    Build {
        /// The image reference (`odek-sandbox:<hash>`).
        reference: String,
    },
    /// The daemon lacks it and the registry does not serve it (or cannot be
    /// asked): every launch is refused until the operator builds, loads or
    /// pulls it, or picks another image.
    Unavailable {
        /// The image reference.
        reference: String,
        /// The daemon's or registry's words (sanitised, one line).
        why: String,
    },
    /// Nothing could be learnt (the daemon did not answer, or it cannot ask
    /// registries): the first launch will tell.
    Unknown {
        /// The image reference.
        reference: String,
        /// Why (one line).
        why: String,
    },
}

impl ImageCheck {
    /// One sentence for a model or a log line.
    pub fn sentence(&self) -> String {
        match self {
            ImageCheck::Present { reference } => {
                format!("The sandbox image {reference} is present on the Docker daemon.")
            }
            ImageCheck::Pullable { reference, digest } => format!(
                "The sandbox image {reference} is not on the Docker daemon yet; its registry serves it ({digest}), so the first launch pulls it (this can take a while)."
            ),
            ImageCheck::Build { reference } => format!(
                "The sandbox image {reference} is built from the project's Dockerfile.odek on the first launch when it is not built yet (this can take a while)."
            ),
            ImageCheck::Unavailable { reference, why } => format!(
                "The sandbox image {reference} is NOT AVAILABLE: the Docker daemon does not have it and it cannot be pulled ({why}). Every launch is refused until the operator builds, loads or pulls it, or starts the server with another --sandbox-image."
            ),
            ImageCheck::Unknown { reference, why } => format!(
                "Whether the sandbox image {reference} can be had is unknown ({why}); the first launch will say."
            ),
        }
    }
}

/// [`ImageCheck`] of `plan` on `engine`: inspect locally; a Dockerfile
/// image is [`ImageCheck::Build`] unless present; otherwise the registry
/// is asked through the daemon ([`DockerApi::registry_digest`]).
pub(crate) async fn check(engine: &dyn DockerApi, plan: &ImagePlan) -> ImageCheck {
    let reference = plan.reference.create_ref();
    let line = |e: &EngineError| crate::text::foreign(&e.message).into_owned();
    match engine.inspect_image(&reference).await {
        Ok(Some(_)) => return ImageCheck::Present { reference },
        Ok(None) => {}
        Err(e) => {
            return ImageCheck::Unknown {
                why: line(&e),
                reference,
            }
        }
    }
    if matches!(plan.source, ImageSource::Dockerfile { .. }) {
        return ImageCheck::Build { reference };
    }
    match engine.registry_digest(&reference).await {
        Ok(Some(digest)) => ImageCheck::Pullable {
            digest: crate::text::foreign(&digest).into_owned(),
            reference,
        },
        Ok(None) => ImageCheck::Unknown {
            why: "this engine cannot ask registries without pulling".into(),
            reference,
        },
        Err(e) if e.is_unreachable() => ImageCheck::Unknown {
            why: line(&e),
            reference,
        },
        Err(e) => ImageCheck::Unavailable {
            why: line(&e),
            reference,
        },
    }
}
