# Developer shortcuts. CI runs .ci/run, which runs the same checks.
GO       ?= go
FUZZTIME ?= 10s
PKGS     ?= ./...
# make install puts the binary where the systemd unit and the mount helper
# look for it: $(DESTDIR)$(PREFIX)/bin/topicfs.
PREFIX   ?= /usr/local

.PHONY: all build install test race lint fuzz bench ci clean model

all: lint race

build:
	$(GO) build -o bin/topicfs .

install: build
	install -D -m 0755 bin/topicfs $(DESTDIR)$(PREFIX)/bin/topicfs

test:
	$(GO) test -count=1 $(PKGS)

# The README's test command.
race:
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

lint:
	$(GO) vet $(PKGS)
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt -l:"; echo "$$out"; exit 1; fi
	@if command -v staticcheck >/dev/null; then staticcheck $(PKGS); else echo "staticcheck not installed: skipped"; fi

# Every FuzzXxx target, FUZZTIME each.
fuzz:
	@grep -rEo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . | sed -E 's#^\./##; s#:func #:#' | sort -u | \
	while IFS=: read -r file name; do \
		echo "fuzz $$name ($$(dirname $$file))"; \
		$(GO) test -run='^$$' -fuzz="^$$name$$" -fuzztime=$(FUZZTIME) ./$$(dirname $$file) || exit 1; \
	done

# Go micro-benchmarks, then the end-to-end table (topicfs bench --quick).
bench:
	$(GO) test -run='^$$' -bench=. -benchmem $(PKGS)
	$(GO) run . bench --quick

ci:
	bash .ci/run

clean:
	rm -rf bin

# TestModel (tests/model_test.go) with a new seed after each passing one, for
# TOPICFS_MODEL_DURATION; it stops at the first failing seed and prints its
# shortest failing operation list. TOPICFS_MODEL_OPS sets operations per seed.
TOPICFS_MODEL_DURATION ?= 10m
TOPICFS_MODEL_OPS      ?= 200
model:
	TOPICFS_MODEL_DURATION=$(TOPICFS_MODEL_DURATION) TOPICFS_MODEL_OPS=$(TOPICFS_MODEL_OPS) \
		$(GO) test -race -count=1 -timeout 0 -run '^TestModel$$' ./tests/
