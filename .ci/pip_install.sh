# Sourced by .ci/install and .ci/tlx_tests: pip_install ARGS... runs .venv's pip install ARGS.
# PyPI downloads of the multi-hundred-MB wheels (torch's CUDA parts, fbtriton) get cut now and then:
# pip resumes a cut download (--resume-retries), and a failed install is retried whole (finished
# downloads stay in pip's cache).
pip_install() {
    local attempt
    for attempt in 1 2 3; do
        .venv/bin/python -m pip install -q --retries 10 --resume-retries 20 "$@" && return 0
        echo "pip install $* failed (attempt $attempt of 3)" >&2
        sleep $((attempt * 10))
    done
    # The CUDA torch build needs ~5 GB in .venv: a full disk is the usual cause of a failure here.
    df -h . "${TMPDIR:-/tmp}" >&2
    return 1
}
