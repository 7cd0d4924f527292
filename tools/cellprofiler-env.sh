#!/usr/bin/env bash
# CellProfiler 4.2.8 in its own environment, headless, on a Debian 12 machine like this one (`make cellprofiler`).
# It never shares the torch environment: CellProfiler 4 needs numpy < 2 and scikit-image 0.19.
#
#   tools/cellprofiler-env.sh [DIR]      build DIR (default .cellprofiler), then check it runs headless
#
# How, and why (docs/trust/method.md, "CellProfiler morphology"):
# - scikit-image must be 0.19.x (0.20 removed the `selem=` argument four modules use) and PyPI has no
#   0.19 wheel for Python 3.11 (a source build takes ~13 min). Debian 12's python3-skimage is 0.19.3,
#   with its numpy 1.24 and scipy 1.10, so the venv is made on the system Python 3.11 with
#   --system-site-packages, and every PyPI package below is held to those numpy/scipy (constraints).
# - cellprofiler / cellprofiler-core 4.2.8.1 pin scipy 1.9 and scikit-image 0.18.3, and list wxPython
#   and mysqlclient, which headless runs never import: both go in with --no-deps, and what a headless
#   run imports is listed here instead.
# - python-javabridge 4.0.5 is source only: built against the venv's numpy (--no-build-isolation) with
#   JAVA_HOME set (Debian's OpenJDK 17, installed here if missing).
# Root runs apt-get for what is missing; anyone else must have the Debian packages already.
# A cluster uses envs/cellprofiler.yaml (bioconda's cellprofiler 4.2.8) with `--sdm conda` instead.
set -euo pipefail

DIR=${1:-.cellprofiler}
DEBIAN_PACKAGES=(python3.11-venv python3-skimage python3-dev openjdk-17-jdk-headless)
PYTHON=/usr/bin/python3.11
STAMP=$DIR/.installed
REQUIREMENTS=tools/cellprofiler-requirements.txt
# The stamp holds the recipe's fingerprint: an edited script or requirement list builds the venv again.
FINGERPRINT=$(cat "$0" "$REQUIREMENTS" | sha256sum | cut -d' ' -f1)
# javabridge's build needs Cython < 3; CellProfiler imports pkg_resources at run time (setuptools < 81).
BUILD_TOOLS=(Cython==0.29.37 setuptools==80.9.0 wheel==0.45.1)

die() {
    echo "cellprofiler-env: $*" >&2
    exit 1
}

missing_packages() {
    local package
    for package in "${DEBIAN_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || echo "$package"
    done
}

install_debian_packages() {
    local missing
    missing=$(missing_packages)
    [[ -z $missing ]] && return 0
    [[ $(id -u) -eq 0 ]] || die "missing Debian packages (install them as root): $missing"
    echo "cellprofiler-env: apt-get install $missing"
    DEBIAN_FRONTEND=noninteractive apt-get -qq update
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get -qq install -y --no-install-recommends $missing > /dev/null
}

java_home() {
    local javac
    javac=$(readlink -f "$(command -v javac)") || die "no javac on PATH (openjdk-17-jdk-headless)"
    dirname "$(dirname "$javac")"
}

build_venv() {
    local tmp=$DIR.partial
    rm -rf "$tmp"
    "$PYTHON" -m venv --system-site-packages "$tmp"
    # pip writes each module's bytecode, so a run never compiles them (PYTHONDONTWRITEBYTECODE would stop it caching them).
    local pip=("$tmp/bin/python" -m pip install -q --disable-pip-version-check)
    # Debian's numpy and scipy, whatever else is asked for (h5py and pyzmq would otherwise pull numpy 2).
    "$tmp/bin/python" -c 'import numpy, scipy; print(f"numpy=={numpy.__version__}\nscipy=={scipy.__version__}")' \
        > "$tmp/constraints.txt"
    # javabridge first, built here against Debian's numpy (an isolated build would take numpy 2's headers).
    "${pip[@]}" "${BUILD_TOOLS[@]}"
    JAVA_HOME=$(java_home) "${pip[@]}" -c "$tmp/constraints.txt" --no-build-isolation python-javabridge==4.0.5
    "${pip[@]}" -c "$tmp/constraints.txt" -r "$REQUIREMENTS"
    "${pip[@]}" --no-deps cellprofiler==4.2.8.1 cellprofiler-core==4.2.8.1
    rm -rf "$DIR"
    mv "$tmp" "$DIR"
    # venv scripts name their interpreter by absolute path: rewrite them for the final folder.
    local script
    for script in $(grep -l "^#!.*$tmp/bin/python" "$DIR"/bin/* 2> /dev/null); do
        sed -i "1s|^#!.*$|#!$(cd "$DIR" && pwd)/bin/python|" "$script"
    done
}

check() {
    "$DIR/bin/python" - << 'EOF'
import skimage, numpy
from cellprofiler_core.preferences import set_headless, set_awt_headless
set_headless(); set_awt_headless(True)
import cellprofiler, cellprofiler_core.pipeline
import cellprofiler.modules.measuretexture  # mahotas
print(f"cellprofiler {cellprofiler.__version__}, scikit-image {skimage.__version__}, numpy {numpy.__version__}")
EOF
}

if [[ -f $STAMP && $(cat "$STAMP") == "$FINGERPRINT" ]] && check > /dev/null 2>&1; then
    exit 0
fi
install_debian_packages
build_venv
check
echo "$FINGERPRINT" > "$STAMP"
