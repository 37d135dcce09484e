# dtlab: the commands people type. CMake does the work (CMakePresets.json); this file only names
# the common runs. `make help` lists them.

# Which LibTorch (Note [Which LibTorch], cmake/DtlabTorch.cmake): TORCH=system is Debian's 1.13
# (or any found through CMAKE_PREFIX_PATH), in build/; TORCH=pip is PyPI's torch that
# `scripts/setup.sh --torch` installs into .torch/venv, in build-pip/; TORCH=/path/to/venv is
# a torch 2.x of yours, in build-torch/. TORCH_CUDA=AUTO|ON|OFF: a pip torch's CUDA half (NCCL), where the wheel has one.
TORCH    ?= system
TORCH_CUDA ?= AUTO
# PYTHON: the tooling's Python (golden data, bench/compare_eager.py) on the same torch.
ifeq ($(TORCH),system)
BUILD    ?= build
TORCH_ARGS :=
PYTHON   ?= .venv-golden/bin/python
else ifeq ($(TORCH),pip)
BUILD    ?= build-pip
TORCH_ARGS := -DDTLAB_TORCH=$(CURDIR)/.torch/venv -DDTLAB_CUDA=$(TORCH_CUDA)
PYTHON   ?= .torch/venv/bin/python
else
BUILD    ?= build-torch
TORCH_ARGS := -DDTLAB_TORCH=$(abspath $(TORCH)) -DDTLAB_CUDA=$(TORCH_CUDA)
PYTHON   ?= $(abspath $(TORCH))/bin/python
endif
JOBS     ?= $(shell nproc)
# The compiler cache (Note [Compiler cache], cmake/DtlabCcache.cmake) is on wherever ccache is
# installed; DTLAB_CCACHE=OFF compiles without it (read at each compile, no reconfigure needed).
ifdef DTLAB_CCACHE
export DTLAB_CCACHE
endif
CMAKE_ARGS ?=
FIXTURES ?= fixtures
OUT      ?= out

# Task 1 on the offline fixtures by default; point MODEL and DATA at bert-base-cased and the real
# RTE folder for the real run (handouts/task1.md), with LR=2e-5 EPOCHS=3.
MODEL  ?= $(FIXTURES)/bert-tiny
DATA   ?= $(FIXTURES)/RTE
LR     ?= 3e-4
EPOCHS ?= 4
BATCH  ?= 32
SEQ    ?= 128
SEED   ?= 42
ARGS   ?=
GLUE_FLAGS = --model_type bert --model_name_or_path $(MODEL) --task_name RTE --do_train --do_eval \
  --data_dir $(DATA) --max_seq_length $(SEQ) --per_gpu_train_batch_size $(BATCH) \
  --learning_rate $(LR) --num_train_epochs $(EPOCHS) --overwrite_output_dir --seed $(SEED)

# The exercises and how they launch, from the table every part of the kit reads (exercises.txt).
EXERCISES := $(shell awk '!/^\#/ && NF {print $$1}' exercises.txt)
DP_TASKS  := $(shell awk '!/^\#/ && $$2 == "ranks" {print $$1}' exercises.txt)
TRAFFIC_TASKS := $(shell awk '!/^\#/ && $$3 == "traffic" {print $$1}' exercises.txt)
# The GPT-2 exercises (kind dp) take the language-model flags; the others BERT's.
LM_TASKS  := $(shell awk '!/^\#/ && $$3 == "dp" {print $$1}' exercises.txt)
# The pipeline across ranks (kind pp): the language-model flags and its own.
PP_TASKS  := $(shell awk '!/^\#/ && $$3 == "pp" {print $$1}' exercises.txt)
# Sharded data parallel (kind zero): the language-model flags and --zero_stage.
ZERO_TASKS := $(shell awk '!/^\#/ && $$3 == "zero" {print $$1}' exercises.txt)
# Tensor parallel (kind tp): the language-model flags and --tp.
TP_TASKS := $(shell awk '!/^\#/ && $$3 == "tp" {print $$1}' exercises.txt)
# Context parallel (kind cp): the language-model flags and --cp.
CP_TASKS := $(shell awk '!/^\#/ && $$3 == "cp" {print $$1}' exercises.txt)
# The device mesh (kind mesh): the language-model flags, --stages, --tp and --mesh_order.
MESH_TASKS := $(shell awk '!/^\#/ && $$3 == "mesh" {print $$1}' exercises.txt)
# Memory and precision (kind precision): the language-model flags, --recompute_every and --precision.
PRECISION_TASKS := $(shell awk '!/^\#/ && $$3 == "precision" {print $$1}' exercises.txt)
GLUE_DP_TASKS := $(filter-out $(LM_TASKS) $(PP_TASKS) $(ZERO_TASKS) $(TP_TASKS) $(CP_TASKS) $(MESH_TASKS) $(PRECISION_TASKS),$(DP_TASKS))

# The data-parallel exercises run WORLD local ranks; the global batch stays BATCH.
WORLD  ?= 4
PORT   ?= 29500
DP_FLAGS = $(GLUE_FLAGS) --global_batch_size $(BATCH) --master_ip 127.0.0.1 --master_port $(PORT) \
  --world_size $(WORLD) --local_rank {rank}

# The grader: `make check-task2b` grades your tasks/task2b; `make check` every exercise.
GRADER    = $(BUILD)/grader/grader
GRADE     ?= $(OUT)/grade
GRADE_ARGS ?=
# The demo grades the reference solutions; in a student release (no solutions/) your own code.
HAVE_SOLUTIONS := $(wildcard solutions)
DEMO_WHAT := $(if $(HAVE_SOLUTIONS),--solutions,)
# The demo is a tour of every check and figure: its timing checks average 9 iterations (the first
# of 10 discarded), where a grading (`make check`, `grader check`) averages 39 of 40; figure 1 and
# every check's line say how many. DEMO_TIMING_ITERATIONS=40 times as a grading does.
DEMO_TIMING_ITERATIONS ?= 10
# One thread a rank, as GPT2_THREADS below. The kit's default (the cores over the ranks) gives a
# single-process run both cores, so its figure against the rank count compares two cores at one
# rank with one core a rank at two; here each rank has one core. Alone on this 2-core machine one
# thread costs little: the demo's grading took 253 s and 279 s at one thread, 254 s and 257 s at
# the default (alternating rounds). Beside other work (a build, a second CI) OpenMP's spinning made
# task 1's steps about 4 times slower at two threads, in wall and in CPU (`task1-solution
# --max_steps 15`: 3.9 s against 16.6 s). DEMO_THREADS=0 takes the kit's default.
DEMO_THREADS ?= 1
comma := ,
# A line of `make help` that names an instructors' command (the benchmarks time the reference
# solutions; the skeletons are generated from them): in a student release it runs `:` instead.
INSTRUCTORS_ONLY := $(if $(HAVE_SOLUTIONS),,@: )

.PHONY: help setup configure build fixtures demo test test-changed skeletons gpt2-demo gpt2-real \
        bench bench-task1 bench-dp bench-gpt2 bench-dp-gpt2 bench-pipeline bench-pp bench-cp bench-precision bench-task1-eager bench-gpt2-eager bench-start clean check report release $(EXERCISES:%=check-%) \
        $(EXERCISES) $(EXERCISES:%=%-solution) $(EXERCISES:%=test-%) cluster-demo

# The exercise lines come from exercises.txt (one per row, in its order), so a new row is listed
# without editing this file; tests/exercise_docs_test.sh holds the README, the handouts and this
# help to the table.
help:
	@echo "make demo            build, grade $(if $(HAVE_SOLUTIONS),the reference solutions,YOUR exercises) with 4 local ranks, render the report"
	@echo "make check           grade all YOUR exercises; make report: render the figures and report of the last grading ($(GRADE)/report)"
	$(if $(HAVE_SOLUTIONS),@echo "make release OUT_KIT=DIR  write the student kit (no solutions) to DIR (instructors)")
	@echo "make test            build and run every test (ctest)"
	@echo "make test-changed    the suites that test what changed since BASE=main (scripts/changed_labels.sh -v says why)"
	@echo "the exercises (exercises.txt): make T runs YOUR tasks/T, make check-T grades it, make test-T runs the tests of the kit's parts it uses$(if $(HAVE_SOLUTIONS),$(comma) make T-solution runs the reference)"
	@awk '!/^#/ && NF { t = $$1; l = $$2; k = $$3; $$1 = $$2 = $$3 = ""; sub(/^ +/, ""); sub(/^uses=[^ ]+ +/, ""); \
	  printf "  make %-9s make check-%-9s make test-%-9s %s (%s)\n", t, t, t, $$0, \
	  l != "ranks" ? "one process" : k == "pp" ? "PP_STAGES=2 local ranks" : k == "tp" ? "TP=2 local ranks" : k == "cp" ? "CP=2 local ranks" : k == "precision" ? "PREC_WORLD=2 local ranks" : \
	  k == "mesh" ? "MESH_STAGES x MESH_TP x MESH_DATA = 8 local ranks" : \
	  "WORLD=4 local ranks" }' exercises.txt
	@echo "  task 1 runs on the fixtures (MODEL DATA LR EPOCHS BATCH SEQ SEED); dp DP_MODEL=gpt2 for GPT-2 small's shape;"
	@echo "  pipeline: single stage, model parallel, pipeline; pp: PP_STAGES=2 ranks, PP_SCHEDULE=1f1b|gpipe, WORLD=4 for data x pipeline"
	@echo "  zero: ZERO_STAGE=1|2|3 (ZeRO-1, ZeRO-2, FSDP; default 3) on WORLD ranks, ZERO_STEPS steps of ZERO_BATCH pairs"
	@echo "  tp: TP=2 ranks per tensor group (default 2), on TP ranks or WORLD (TP x DP), TP_STEPS steps of TP_BATCH pairs"
	@echo "  cp: CP=2 ranks per context group (default 2), on CP ranks or WORLD (CP x DP), CP_BLOCK keys a block, CP_LAYOUT=balanced|contiguous"
	@echo "  precision: PREC_WORLD=2 ranks, PREC_RECOMPUTE=N (every N-th block checkpointed; 0 none), PREC_DTYPE=fp32|bf16|fp16, PREC_MICRO micro-batches"
	$(if $(HAVE_SOLUTIONS),@echo "make cluster-demo    (root) tasks 2a/2b/3 on 4 and 2 emulated hosts at several link rates$(comma) dp and pp at 1 Gbit/s$(comma) dp and zero's stages$(comma) pp and tp on 4 hosts at every rate$(comma) the mesh's layouts on 2 hosts of 4 ranks; figures 9$(comma) 12$(comma) 14$(comma) 15 and 17")
	$(INSTRUCTORS_ONLY)@echo "make bench           the four benchmarks below (about 18 minutes on 2 cores)"
	$(INSTRUCTORS_ONLY)@echo "make bench-task1     time task 1's training step for tiny/mini/small/base BERT"
	$(INSTRUCTORS_ONLY)@echo "make bench-dp        time per iteration of task 2a/2b/3 at 1, 2, 4 ranks; DDP bucket-cap sweep"
	$(INSTRUCTORS_ONLY)@echo "make bench-gpt2      time the GPT-2 training step (gpt2-mini, GPT-2 small; batch 8 x 128)"
	$(INSTRUCTORS_ONLY)@echo "make bench-dp-gpt2   time the dp exercise's step at 1, 2, 4 ranks (gpt2-mini, GPT-2 small; 8 x 128 per rank)"
	$(INSTRUCTORS_ONLY)@echo "make bench-pipeline  time the pipeline exercise's step: model parallel vs 8 micro-batches, 2 balanced stages"
	$(INSTRUCTORS_ONLY)@echo "make bench-pp        time the pp exercise's step: GPipe vs 1F1B on 2 stage ranks x 8 micro-batches"
	$(INSTRUCTORS_ONLY)@echo "make bench-cp        cp vs sequence length: the attention's and a training step's memory per rank and time, naive, CP 1, 2, 4; causal imbalance (figure 16)"
	$(INSTRUCTORS_ONLY)@echo "make bench-precision precision: activation memory and step time vs layers for no/every/every-2nd block checkpointed; fp32, bf16, fp16 losses (figure 18)"
	$(INSTRUCTORS_ONLY)@echo "make bench-task1-eager, bench-gpt2-eager  the kit's step against eager PyTorch, alternating rounds (needs tests/golden/setup_venv.sh)"
	$(INSTRUCTORS_ONLY)@echo "make bench-start     a start of a program linking Debian's LibTorch in its own order and in the kit's (Note [LibTorch's start order])"
	@echo "make gpt2-real       the same on real German->English text from the Ding dictionary (offline)"
	@echo "make gpt2-demo       train the tiny GPT-2 to translate the fixture (one process): loss, perplexity, BLEU"
	$(INSTRUCTORS_ONLY)@echo "make skeletons       regenerate tasks/ from solutions/ (instructors)"
	@echo "make asan-unit       the unit suites under AddressSanitizer + UBSan (clang 14, setup.sh --asan; build-asan/; CI); make asan: every suite"
	@echo "make tsan            the suites that start threads under ThreadSanitizer (build-tsan/)"
	@echo "make fuzz, fuzz-replay  fuzz the readers of outside input (clang 14; setup.sh --fuzz)"
	@echo "variables: MODEL DATA LR EPOCHS BATCH SEQ SEED ARGS='--dropout 0' CMAKE_ARGS=..."

setup:
	./scripts/setup.sh

$(BUILD)/build.ninja:
	cmake --preset default -B $(BUILD) $(TORCH_ARGS) $(CMAKE_ARGS)

configure: $(BUILD)/build.ninja

build: configure
	scripts/build.sh $(BUILD) -j $(JOBS)

fixtures: build
	$(BUILD)/tools/dtlab-fixtures --out $(FIXTURES)

task1: fixtures
	$(BUILD)/task1 $(GLUE_FLAGS) --output_dir $(OUT)/task1 $(ARGS)

# A student release has no solutions/: `make T-solution` says so in one line instead of running
# a binary that was never built; the rules below make T-solution only where solutions/ is.
solutions_of = $(if $(HAVE_SOLUTIONS),$(1:%=%-solution))
ifeq ($(HAVE_SOLUTIONS),)
$(EXERCISES:%=%-solution):
	$(error make $@: the reference solutions are not part of the student kit; run yours with make $(@:%-solution=%))
endif

$(call solutions_of,task1): fixtures
	$(BUILD)/task1-solution $(GLUE_FLAGS) --output_dir $(OUT)/task1-solution $(ARGS)

# A traffic exercise (task4) takes the batch sizes itself (--batch_sizes, default 64,32,16).
$(GLUE_DP_TASKS) $(call solutions_of,$(GLUE_DP_TASKS)): fixtures
	scripts/run_local_ranks.sh $(WORLD) $(OUT)/$@/logs -- $(BUILD)/$@ \
	  $(if $(filter $(TRAFFIC_TASKS),$(@:%-solution=%)),$(subst --global_batch_size $(BATCH),,$(subst --do_train --do_eval,,$(DP_FLAGS))),$(DP_FLAGS)) \
	  --output_dir $(OUT)/$@ $(ARGS)

# GPT-2 data parallel (dp) on WORLD local ranks: a GPT-2 of the shape DP_MODEL (gpt2-mini: 4
# layers of 128, an epoch of the fixture in minutes; gpt2: GPT-2 small's shape) with random
# weights and the fixture's tokenizer, a global batch of GPT2_BATCH pairs split over the ranks.
DP_MODEL ?= gpt2-mini
$(LM_TASKS) $(call solutions_of,$(LM_TASKS)): fixtures
	scripts/run_local_ranks.sh $(WORLD) $(OUT)/$@/logs -- $(BUILD)/$@ \
	  --model_config $(DP_MODEL) --tokenizer_dir $(GPT2_MODEL) --data_dir $(GPT2_DATA) \
	  --global_batch_size $(GPT2_BATCH) --learning_rate $(GPT2_LR) --num_epochs $(GPT2_EPOCHS) --seed $(SEED) \
	  --output_dir $(OUT)/$@ --overwrite_output_dir --no_save \
	  --master_ip 127.0.0.1 --master_port $(PORT) --world_size $(WORLD) --local_rank {rank} $(ARGS)

# GPT-2 pipeline parallel (pipeline) in one process: the same GPT-2 as dp, its layers on
# PIPE_STAGES worker threads, PIPE_STEPS steps of GPT2_BATCH pairs in three modes: single stage,
# model parallel (1 micro-batch) and pipeline (PIPE_MICRO micro-batches). Each run prints its
# throughput; the last lines put them side by side.
PIPE_STAGES ?= 2
PIPE_MICRO  ?= 4
PIPE_STEPS  ?= 30
pipeline $(call solutions_of,pipeline): fixtures
	@mkdir -p $(OUT)/$@
	@for mode in "single:--stages 1" "model-parallel:--stages $(PIPE_STAGES) --micro_batches 1" \
	             "pipeline:--stages $(PIPE_STAGES) --micro_batches $(PIPE_MICRO)"; do \
	  name=$${mode%%:*}; flags=$${mode#*:}; echo "== $@ $$name: $$flags"; \
	  $(BUILD)/$@ --model_config $(DP_MODEL) --tokenizer_dir $(GPT2_MODEL) --data_dir $(GPT2_DATA) \
	    --batch_size $(GPT2_BATCH) --learning_rate $(GPT2_LR) --max_steps $(PIPE_STEPS) --no_eval --seed $(SEED) \
	    --output_dir $(OUT)/$@/$$name --overwrite_output_dir --no_save $$flags $(ARGS) \
	    | tee $(OUT)/$@/$$name.log || exit $$?; \
	done; echo "== $@: throughput by mode"; grep -H "^throughput" $(OUT)/$@/single.log $(OUT)/$@/model-parallel.log \
	  $(OUT)/$@/pipeline.log

# GPT-2 pipeline parallel across ranks (pp): PP_STAGES stage ranks per pipeline, the PP_SCHEDULE
# schedule over PP_MICRO micro-batches, PIPE_STEPS steps of a global batch of GPT2_BATCH pairs.
# The world is PP_STAGES ranks (one pipeline) unless WORLD is given on the command line: WORLD=4
# PP_STAGES=2 is 2 pipelines x 2 stages, data x pipeline parallel.
PP_STAGES   ?= 2
PP_MICRO    ?= 4
PP_SCHEDULE ?= 1f1b
PP_WORLD = $(if $(filter command line environment,$(origin WORLD)),$(WORLD),$(PP_STAGES))
$(PP_TASKS) $(call solutions_of,$(PP_TASKS)): fixtures
	scripts/run_local_ranks.sh $(PP_WORLD) $(OUT)/$@/logs -- $(BUILD)/$@ \
	  --model_config $(DP_MODEL) --tokenizer_dir $(GPT2_MODEL) --data_dir $(GPT2_DATA) \
	  --global_batch_size $(GPT2_BATCH) --learning_rate $(GPT2_LR) --max_steps $(PIPE_STEPS) --no_eval --seed $(SEED) \
	  --stages $(PP_STAGES) --micro_batches $(PP_MICRO) --schedule $(PP_SCHEDULE) \
	  --output_dir $(OUT)/$@ --overwrite_output_dir --no_save \
	  --master_ip 127.0.0.1 --master_port $(PORT) --world_size $(PP_WORLD) --local_rank {rank} $(ARGS)

# Sharded data parallel (zero) on WORLD local ranks: the GPT-2 of dp, ZERO_STEPS steps of a global
# batch of ZERO_BATCH pairs (24: 1, 2, 3, 4, 6 and 8 ranks divide it) at ZERO_STAGE (1 ZeRO-1, 2
# ZeRO-2, 3 FSDP); the run ends with what a rank held and sent (results.json's "sharding").
# WORLD=3 pads every unit.
ZERO_STAGE ?= 3
ZERO_STEPS ?= 30
ZERO_BATCH ?= 24
$(ZERO_TASKS) $(call solutions_of,$(ZERO_TASKS)): fixtures
	scripts/run_local_ranks.sh $(WORLD) $(OUT)/$@/logs -- $(BUILD)/$@ \
	  --model_config $(DP_MODEL) --tokenizer_dir $(GPT2_MODEL) --data_dir $(GPT2_DATA) \
	  --global_batch_size $(ZERO_BATCH) --learning_rate $(GPT2_LR) --max_steps $(ZERO_STEPS) --no_eval --seed $(SEED) \
	  --zero_stage $(ZERO_STAGE) --output_dir $(OUT)/$@ --overwrite_output_dir --no_save \
	  --master_ip 127.0.0.1 --master_port $(PORT) --world_size $(WORLD) --local_rank {rank} $(ARGS)

# Tensor parallel (tp): the GPT-2 of dp split over TP ranks, TP_STEPS steps of a global batch of
# TP_BATCH pairs (24, like zero's). On TP ranks unless WORLD is given: `make tp WORLD=4 TP=2` is TP 2 x DP 2. The
# run ends with what a rank held and all-reduced (results.json's "tensor_parallel"). gpt2-mini has
# 4 heads: TP 1, 2 or 4; at TP 4 the fixture tokenizer's vocabulary of 1482 is padded to 1484.
TP       ?= 2
TP_STEPS ?= 30
TP_BATCH ?= 24
TP_WORLD = $(if $(filter command line environment,$(origin WORLD)),$(WORLD),$(TP))
$(TP_TASKS) $(call solutions_of,$(TP_TASKS)): fixtures
	scripts/run_local_ranks.sh $(TP_WORLD) $(OUT)/$@/logs -- $(BUILD)/$@ \
	  --model_config $(DP_MODEL) --tokenizer_dir $(GPT2_MODEL) --data_dir $(GPT2_DATA) \
	  --global_batch_size $(TP_BATCH) --learning_rate $(GPT2_LR) --max_steps $(TP_STEPS) --no_eval --seed $(SEED) \
	  --tp $(TP) --output_dir $(OUT)/$@ --overwrite_output_dir --no_save \
	  --master_ip 127.0.0.1 --master_port $(PORT) --world_size $(TP_WORLD) --local_rank {rank} $(ARGS)

# Context parallel (cp): the GPT-2 of dp with every sequence split over CP ranks, CP_STEPS steps of a
# global batch of CP_BATCH pairs. On CP ranks unless WORLD is given: `make cp WORLD=4 CP=2` is CP 2 x
# DP 2. The run ends with each rank's bytes sent and held (results.json's "context_parallel").
CP        ?= 2
CP_STEPS  ?= 30
CP_BATCH  ?= 24
CP_BLOCK  ?= 16
CP_LAYOUT ?= balanced
CP_WORLD = $(if $(filter command line environment,$(origin WORLD)),$(WORLD),$(CP))
$(CP_TASKS) $(call solutions_of,$(CP_TASKS)): fixtures
	scripts/run_local_ranks.sh $(CP_WORLD) $(OUT)/$@/logs -- $(BUILD)/$@ \
	  --model_config $(DP_MODEL) --tokenizer_dir $(GPT2_MODEL) --data_dir $(GPT2_DATA) \
	  --global_batch_size $(CP_BATCH) --learning_rate $(GPT2_LR) --max_steps $(CP_STEPS) --no_eval --seed $(SEED) \
	  --cp $(CP) --cp_block $(CP_BLOCK) --cp_layout $(CP_LAYOUT) --output_dir $(OUT)/$@ --overwrite_output_dir --no_save \
	  --master_ip 127.0.0.1 --master_port $(PORT) --world_size $(CP_WORLD) --local_rank {rank} $(ARGS)

# Memory and precision (precision): the GPT-2 of dp on PREC_WORLD ranks (2), PREC_STEPS steps of a global
# batch of PREC_BATCH pairs in PREC_MICRO micro-batches a rank; every PREC_RECOMPUTE-th block
# checkpointed (0: none), PREC_DTYPE fp32, bf16 or fp16 (fp16 gradients with the dynamic loss
# scaler; ARGS="--loss_scale none" without it). results.json's "memory_precision" holds what each
# block kept, its forwards, the step's peak and, in fp16, every step's scale and flushed gradients.
PREC_WORLD     ?= 2
PREC_STEPS     ?= 20
PREC_BATCH     ?= 16
PREC_MICRO     ?= 2
PREC_RECOMPUTE ?= 1
PREC_DTYPE ?= bf16
$(PRECISION_TASKS) $(call solutions_of,$(PRECISION_TASKS)): fixtures
	scripts/run_local_ranks.sh $(PREC_WORLD) $(OUT)/$@/logs -- $(BUILD)/$@ \
	  --model_config $(DP_MODEL) --tokenizer_dir $(GPT2_MODEL) --data_dir $(GPT2_DATA) \
	  --global_batch_size $(PREC_BATCH) --learning_rate $(GPT2_LR) --max_steps $(PREC_STEPS) --no_eval --seed $(SEED) \
	  --micro_batches $(PREC_MICRO) --recompute_every $(PREC_RECOMPUTE) --precision $(PREC_DTYPE) \
	  --output_dir $(OUT)/$@ --overwrite_output_dir --no_save --master_ip 127.0.0.1 --master_port $(PORT) \
	  --world_size $(PREC_WORLD) --local_rank {rank} $(ARGS)

# The device mesh (mesh): the GPT-2 of dp on MESH_DATA x MESH_STAGES x MESH_TP ranks (2 x 2 x 2),
# MESH_STEPS steps of a global batch of MESH_BATCH pairs, the axes in MESH_ORDER (slowest first,
# Megatron's); MESH_ZERO=1 shards AdamW's state over each data group with your tasks/zero's ZeRO-1.
# The run prints every rank's place at start; results.json's "mesh" holds every rank's coordinates,
# parameter bytes, each group's bytes a step and the sends each rank made to each other.
MESH_DATA   ?= 2
MESH_STAGES ?= 2
MESH_TP     ?= 2
MESH_STEPS  ?= 20
MESH_BATCH  ?= 16
MESH_ORDER  ?= pipeline,data,tensor
MESH_ZERO   ?= 0
MESH_WORLD = $(shell echo $$(( $(MESH_DATA) * $(MESH_STAGES) * $(MESH_TP) )))
$(MESH_TASKS) $(call solutions_of,$(MESH_TASKS)): fixtures
	scripts/run_local_ranks.sh $(MESH_WORLD) $(OUT)/$@/logs -- $(BUILD)/$@ \
	  --model_config $(DP_MODEL) --tokenizer_dir $(GPT2_MODEL) --data_dir $(GPT2_DATA) \
	  --global_batch_size $(MESH_BATCH) --learning_rate $(GPT2_LR) --max_steps $(MESH_STEPS) --no_eval --seed $(SEED) \
	  --stages $(MESH_STAGES) --tp $(MESH_TP) --micro_batches 2 --mesh_order $(MESH_ORDER) --zero_stage $(MESH_ZERO) --output_dir $(OUT)/$@ \
	  --overwrite_output_dir --no_save --master_ip 127.0.0.1 --master_port $(PORT) --world_size $(MESH_WORLD) \
	  --local_rank {rank} $(ARGS)

# Tasks 2a, 2b and 3 on an emulated cluster (root: network namespaces whose links are
# rate-limited in both directions; scripts/cluster_demo.sh): CLUSTER_RATES x CLUSTER_RANKS, a
# BERT of 5 BERT-base layers on a short sequence and a small batch, so that the network decides;
# then dp at 1, 2, 4 hosts and pp at 2 and 4 hosts (one stage each) at the first rate, dp and
# zero at ZeRO-1, ZeRO-2 and FSDP on 4 hosts at every rate, and dp, pp and tp (TP 4, TP 2 x DP 2)
# on 4 hosts at CLUSTER_AXES_RATES (down to 250 Mbit/s, where the bytes decide), and the mesh's
# layouts on 2 hosts of 4 ranks at the same rates (figure 17). CLUSTER_PARTS picks parts (bert
# gpt2 zero axes mesh).
CLUSTER_RATES ?= 1gbit 2500mbit 10gbit unlimited
CLUSTER_AXES_RATES ?= 250mbit 1gbit 10gbit unlimited
CLUSTER_RANKS ?= 4 2
CLUSTER_STEPS ?= 6
CLUSTER_PARTS ?= bert gpt2 zero axes mesh
cluster-demo: build
	scripts/cluster_demo.sh --out $(GRADE) --rates "$(CLUSTER_RATES)" --axes_rates "$(CLUSTER_AXES_RATES)" --ranks "$(CLUSTER_RANKS)" \
	  --steps $(CLUSTER_STEPS) --build $(BUILD) --parts "$(CLUSTER_PARTS)"

# GPT-2 learns the invented German->English fixture in one process (dtlab-gpt2, the reference of
# the language-model exercises): per-epoch validation loss, perplexity, BLEU and a few
# translations. Only its two programs are built. GPT2_MODEL and GPT2_DATA point at a real
# GPT-2 folder and translation set for a real run.
GPT2_MODEL  ?= $(FIXTURES)/gpt2-tiny
GPT2_DATA   ?= $(FIXTURES)/translation
GPT2_LR     ?= 1e-3
GPT2_EPOCHS ?= 3
GPT2_BATCH  ?= 32
# One thread: this model's matrix products are too small to gain much from a second, and on a
# busy shared machine OpenMP's waits made two threads 15 times slower (2.0 s against 0.12 s a
# step, 2 cores at load 4). GPT2_THREADS=0 takes the cores available.
GPT2_THREADS ?= 1

gpt2-demo: configure
	scripts/build.sh $(BUILD) -j $(JOBS) --target dtlab-fixtures dtlab-gpt2
	$(BUILD)/tools/dtlab-fixtures --out $(FIXTURES)
	$(BUILD)/tools/dtlab-gpt2 --model_name_or_path $(GPT2_MODEL) --data_dir $(GPT2_DATA) \
	  --batch_size $(GPT2_BATCH) --learning_rate $(GPT2_LR) --num_epochs $(GPT2_EPOCHS) --seed $(SEED) \
	  --threads $(GPT2_THREADS) --output_dir $(OUT)/gpt2 --overwrite_output_dir $(ARGS)

# The same on real text, offline: German->English sentence pairs of the original's sizes from
# Debian's Ding dictionary (install it with `sudo ./scripts/setup.sh --with-real-text`), a BPE
# trained on their training split and a random GPT-2 of its vocabulary, trained GPT2_EPOCHS.
REAL_DATA ?= data/ding-de-en
REAL_GPT2 ?= data/gpt2-ding
gpt2-real: configure
	scripts/build.sh $(BUILD) -j $(JOBS) --target dtlab-translation-data dtlab-gpt2
	$(BUILD)/tools/dtlab-translation-data --out $(REAL_DATA) --gpt2_out $(REAL_GPT2) --seed $(SEED)
	$(BUILD)/tools/dtlab-gpt2 --model_name_or_path $(REAL_GPT2) --data_dir $(REAL_DATA) \
	  --batch_size $(GPT2_BATCH) --learning_rate $(GPT2_LR) --num_epochs $(GPT2_EPOCHS) --seed $(SEED) \
	  --threads $(GPT2_THREADS) --output_dir $(OUT)/gpt2-real --overwrite_output_dir $(ARGS)

# Note [Tests that wait] (tests/CMakeLists.txt): ctest runs one CPU-bound entry per core (JOBS
# cores in a resource spec, each entry takes one) and, beside them, up to two that mostly wait for
# a timeout. $(call CTEST_CORES,FOLDER) writes the spec into a build folder; $(call
# CTEST_JOBS,FOLDER) are ctest's flags that read it.
CTEST_CORES = printf '{"version": {"major": 1, "minor": 0}, "local": [{"cores": [{"id": "0", "slots": %d}]}]}\n' \
  $(JOBS) >$(1)/ctest-cores.json
CTEST_JOBS = -j $$(($(JOBS) + 2)) --resource-spec-file $(abspath $(1))/ctest-cores.json

# A test-T that finds no test under its label fails (--no-tests=error): it must never look green.
$(EXERCISES:%=test-%): build
	@$(call CTEST_CORES,$(BUILD))
	ctest --test-dir $(BUILD) --output-on-failure $(call CTEST_JOBS,$(BUILD)) -L '^$(@:test-%=%)$$' --no-tests=error

# The contributors' fast loop (not CI's): the suites whose labels match the folders changed since
# BASE (default main; uncommitted and untracked files count), as scripts/changed_labels.sh maps
# them (-v there says which file chose which label). A change to the build, cmake/, scripts/ or a
# header of core/ runs every suite.
BASE ?= main
test-changed: build
	@$(call CTEST_CORES,$(BUILD))
	@labels=$$(scripts/changed_labels.sh $(BASE)) || exit $$?; \
	if [ -z "$$labels" ]; then echo "test-changed: nothing changed since $(BASE) that a suite tests"; \
	elif [ "$$labels" = ALL ]; then echo "test-changed: a change since $(BASE) reaches every suite: all of them"; \
	  ctest --test-dir $(BUILD) --output-on-failure $(call CTEST_JOBS,$(BUILD)); \
	else echo "test-changed: ctest -L '$$labels'"; \
	  ctest --test-dir $(BUILD) --output-on-failure $(call CTEST_JOBS,$(BUILD)) -L "$$labels" --no-tests=error; fi

# Grades everything, then renders the report even when a check failed, and exits with the
# grading's status. It builds what the grading runs (the grader with the programs it starts, and
# each exercise's binary: the reference's where solutions/ is), not the test suites: `make test`
# builds those.
demo: configure
	scripts/build.sh $(BUILD) -j $(JOBS) --target grader $(if $(HAVE_SOLUTIONS),$(EXERCISES:%=%-solution),$(EXERCISES))
	@status=0; $(GRADER) check all $(DEMO_WHAT) --timing-iterations $(DEMO_TIMING_ITERATIONS) --threads $(DEMO_THREADS) \
	  --results $(GRADE) $(GRADE_ARGS) || status=$$?; \
	  $(GRADER) report --results $(GRADE) && exit $$status

# Grading T builds the grader (with the programs it runs: dtlab-reference, dtlab-gpt2, the
# fixtures' generator, the sandbox launcher) and the exercise's binary, not the whole kit.
check: configure
	scripts/build.sh $(BUILD) -j $(JOBS) --target grader $(EXERCISES)
	$(GRADER) check all --results $(GRADE) $(GRADE_ARGS)

$(EXERCISES:%=check-%): configure
	scripts/build.sh $(BUILD) -j $(JOBS) --target grader $(@:check-%=%)
	$(GRADER) check $(@:check-%=%) --results $(GRADE) $(GRADE_ARGS)

report:
	$(GRADER) report --results $(GRADE)


# The pass's output is also kept in BUILD/Testing/make-test.log, where scripts/build_costs.sh
# reads each entry's seconds (ctest's own LastTest.log is rewritten by any `ctest -N` in the
# folder, and exercise_docs_test runs one during the pass).
test: build
	@$(call CTEST_CORES,$(BUILD))
	ctest --test-dir $(BUILD) --output-on-failure $(call CTEST_JOBS,$(BUILD)) -O $(abspath $(BUILD))/Testing/make-test.log

# The benchmarks, the skeletons' generator and the release writer need solutions/ (bench-start
# only bench/, which the release leaves out with them): in a student release they say so in one
# line instead of ninja's "unknown target".
INSTRUCTOR_TARGETS := skeletons release bench bench-task1 bench-dp bench-gpt2 bench-dp-gpt2 bench-pipeline bench-pp bench-cp \
  bench-precision bench-start \
  bench-task1-eager bench-gpt2-eager
ifeq ($(HAVE_SOLUTIONS),)
$(INSTRUCTOR_TARGETS):
	$(error make $@: the benchmarks, the skeletons' generator and the release writer work from the reference solutions, which the student kit does not have)
else
skeletons: build
	$(GRADER) skeletons

release: build
	@test -n "$(OUT_KIT)" || { echo "make release OUT_KIT=DIR: name the new folder"; exit 2; }
	$(GRADER) release --out $(OUT_KIT)

bench: configure
	cmake --build $(BUILD) --target bench

bench-task1: build
	scripts/build.sh $(BUILD) --target bench_task1
	$(BUILD)/bench/bench_task1

bench-dp: configure
	cmake --build $(BUILD) --target bench-dp

bench-gpt2: configure
	cmake --build $(BUILD) --target bench-gpt2

bench-dp-gpt2: configure
	cmake --build $(BUILD) --target bench-dp-gpt2

bench-pipeline: configure
	cmake --build $(BUILD) --target bench-pipeline

bench-pp: configure
	cmake --build $(BUILD) --target bench-pp
bench-cp: configure
	cmake --build $(BUILD) --target bench-cp
bench-precision: configure
	cmake --build $(BUILD) --target bench-precision

# The kit's step against the same model in eager PyTorch (transformers, on the same torch as the
# build: Debian's PyTorch 1.13, or TORCH=pip's 2.x) in alternating rounds, task 1's BERT or
# dtlab-gpt2's GPT-2 (bench/compare_eager.py; ARGS=--profile DIR profiles both sides, ARGS=--compile
# adds torch.compile on 2.x): tooling, it needs tests/golden/setup_venv.sh [--torch] once (PyPI).
bench-task1-eager: configure
	scripts/build.sh $(BUILD) --target bench_task1
	$(PYTHON) bench/compare_eager.py --bench task1 --build $(BUILD) $(ARGS)
bench-gpt2-eager: configure
	scripts/build.sh $(BUILD) --target bench_gpt2
	$(PYTHON) bench/compare_eager.py --bench gpt2 --build $(BUILD) $(ARGS)
# Note [LibTorch's start order] (cmake/DtlabTorchStartOrder.cmake): no build needed, it links two
# programs that do nothing itself. ROUNDS: 20 unless given.
bench-start:
	bench/torch_start.sh $(ROUNDS)
endif

clean:
	rm -rf $(BUILD)

# On a machine with NVIDIA GPUs: the kit built with CUDA and NCCL into build-gpu/, ctest -L gpu, the
# step benchmarks on the GPU and the eager comparison, each step timed, within about 8 minutes; a
# summary in build-gpu/gpu-check-summary.txt (scripts/gpu_check.sh). TORCH=/path/to/venv or pip
# picks the torch; by default the torch of python3 on PATH. Without a GPU: one line, exit 1.
.PHONY: gpu-check
gpu-check:
	scripts/gpu_check.sh $(if $(filter-out system,$(TORCH)),--torch $(if $(filter pip,$(TORCH)),$(CURDIR)/.torch/venv,$(abspath $(TORCH))))

# Sanitizers (docs/SANITIZERS.md): the kit built by GCC with AddressSanitizer + UndefinedBehavior-
# Sanitizer into build-asan/, or ThreadSanitizer into build-tsan/, against Debian's LibTorch (not
# instrumented: the kit's own code is what is checked). `make asan` runs the whole suite, `make
# asan-unit` the unit suites (CI), `make tsan` the suites that start threads, under `setarch -R`
# (TSan's shadow memory needs the fixed layout that the kernel's mmap randomisation breaks) and
# with one OpenMP thread (libgomp's barriers are invisible to TSan). tests/sanitizers/ holds the
# suppression files, each line with its reason. The times are in docs/SANITIZERS.md.
SAN_DIR   := $(CURDIR)/tests/sanitizers
# handle_segv=0...: a crash stays a signal, which the grader reports as such (ASan's own handler
# would make it exit 1, "an internal error").
ASAN_ENV  := ASAN_OPTIONS=detect_leaks=1:check_initialization_order=1:detect_stack_use_after_return=1:handle_segv=0:handle_sigbus=0:handle_sigfpe=0 \
             LSAN_OPTIONS=suppressions=$(SAN_DIR)/lsan.supp:print_suppressions=0 \
             UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
TSAN_ENV  := TSAN_OPTIONS=suppressions=$(SAN_DIR)/tsan.supp:halt_on_error=1:second_deadlock_stack=1 OMP_NUM_THREADS=1
TSAN_TESTS ?= ^(pipeline_test|heartbeat_test|ddp_test|collectives_test|tokenizer_test|gpt2_tokenizer_test|Faults[./])
.PHONY: asan asan-unit tsan
# ASan's build is clang 14's (docs/SANITIZERS.md): `scripts/setup.sh --asan` installs it.
build-asan/build.ninja: | asan-compiler
build-asan/build.ninja build-tsan/build.ninja: build-%/build.ninja: CMakePresets.json
	cmake --preset $*
	touch $@
.PHONY: asan-compiler
asan-compiler:
	@command -v clang++-14 >/dev/null || { echo "make: the sanitizer build compiles with clang++-14, which is not installed: run ./scripts/setup.sh --asan" >&2; exit 1; }
asan: build-asan/build.ninja
	scripts/build.sh build-asan -j $(JOBS)
	@$(call CTEST_CORES,build-asan)
	$(ASAN_ENV) ctest --test-dir build-asan --output-on-failure $(call CTEST_JOBS,build-asan)
asan-unit: build-asan/build.ninja
	scripts/build.sh build-asan -j $(JOBS) --target unit_tests foundation_tests
	@$(call CTEST_CORES,build-asan)
	$(ASAN_ENV) ctest --test-dir build-asan -L unit --output-on-failure $(call CTEST_JOBS,build-asan)
tsan: build-tsan/build.ninja
	scripts/build.sh build-tsan -j $(JOBS) --target unit_tests foundation_tests faults_test
	$(TSAN_ENV) setarch $$(uname -m) -R ctest --test-dir build-tsan -R '$(TSAN_TESTS)' --output-on-failure -j $(JOBS)

# Fuzzing the readers of outside input (docs/FUZZING.md): libFuzzer harnesses built with clang 14
# outside the kit's build, without LibTorch, into build-fuzz/ (fuzz/run.sh). `make fuzz` fuzzes
# each target for FUZZ_SECONDS (findings in build-fuzz/artifacts/, new inputs in
# build-fuzz/corpus/), FUZZ_JOBS (the cores) targets at a time; `make fuzz-replay` runs each
# committed corpus once (-runs=0), as CI does.
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_JOBS    ?= $(JOBS)
.PHONY: fuzz fuzz-replay
fuzz:
	JOBS=$(FUZZ_JOBS) fuzz/run.sh fuzz $(FUZZ_BUILD) $(FUZZ_SECONDS)
fuzz-replay:
	JOBS=$(FUZZ_JOBS) fuzz/run.sh replay $(FUZZ_BUILD)
