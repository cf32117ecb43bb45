# Source me: installs Mesa's CPU Vulkan driver (lavapipe) if missing and points wgpu at it,
# so trueno-wgpu's shaders run on any Linux machine without a GPU (CI does this).
export DEBIAN_FRONTEND=noninteractive
_pk=(mesa-vulkan-drivers libvulkan1)
dpkg -s "${_pk[@]}" >/dev/null 2>&1 || {
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${_pk[@]}" >/dev/null
}
export WGPU_BACKEND=vulkan
export VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
export VK_ICD_FILENAMES=$VK_DRIVER_FILES
[ -d "${XDG_RUNTIME_DIR:-/nonexistent}" ] || {
    XDG_RUNTIME_DIR=$(mktemp -d)
    export XDG_RUNTIME_DIR
    chmod 700 "$XDG_RUNTIME_DIR"
}
