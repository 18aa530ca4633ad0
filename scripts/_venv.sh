# Shared set-up of scripts/test and scripts/demo (sourced, not run): make .venv, install the
# project into it when pyproject.toml or the C sources changed, byte-compile the package.
#
#   ensure_venv NAME TARGET   NAME tells the install stamps apart; TARGET is what pip installs
#                             (".", ".[test,dev]").

ensure_venv() {
    local name="$1" target="$2"
    if [ ! -x .venv/bin/python ]; then
        "${PYTHON:-python3}" -m venv .venv
    fi
    # The C fast paths are built at install, so their sources are part of the stamp too.
    local stamp
    stamp=.venv/.installed-$name-$(cat pyproject.toml scripts/_venv.sh cartridge_runtime/protocol/_csrc/*.c \
        cartridge_runtime/protocol/_csrc/*.h | sha256sum | cut -c1-16)
    if [ ! -f "$stamp" ]; then
        echo "setting up .venv (installing the project; once per pyproject change)..." >&2
        # pip's and setuptools' chatter goes to a log, shown only when the install fails.
        # The compat editable mode puts the checkout on sys.path with a plain .pth line, which
        # type checkers follow (the default mode's import hook hides the package and its
        # py.typed from mypy run in another project).
        if ! { .venv/bin/python -m pip install --quiet --upgrade pip &&
                .venv/bin/python -m pip install --quiet -e "$target" \
                    --config-settings editable_mode=compat; } > .venv/install.log 2>&1; then
            cat .venv/install.log >&2
            echo "error: installing the project failed (log above, also in .venv/install.log)" >&2
            exit 1
        fi
        touch "$stamp"
    fi
    # Byte-compile the package, as pip does for an installed one: an editable install is
    # otherwise compiled again by every process that imports it wherever bytecode caching is
    # off (PYTHONDONTWRITEBYTECODE), about 70 ms of each cartridge's start. Up-to-date files
    # are skipped; a syntax error is reported here and again by whatever imports the module.
    .venv/bin/python -m compileall -q cartridge_runtime || true
}
