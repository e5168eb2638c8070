"""Knowledge distillation, a run of its own beside pre-training and fine-tuning: a small
student mimics a larger teacher.

Two modes, each a `TrainingProgram` for bertkit.training.loop (no second loop):

- General distillation (DistilBERT) on pre-training data (a `bertkit data build`
  directory), `GeneralDistillation`: the objective's dynamic masking, then
      loss = alpha_soft * T^2 KL(softmax(t/T) || softmax(s/T))   at the masked positions
           + alpha_hard * CE(student MLM logits, original tokens)  at the masked positions
           + alpha_cos  * (1 - cos(h_student, h_teacher))          over the real tokens (last layer)
           + alpha_hidden    * TinyBERT hidden-state MSE (embeddings and every mapped layer)
           + alpha_attention * TinyBERT attention-map MSE (every mapped layer),
  each term divided by its *global* count (masked tokens or real tokens) as the loop
  requires. Defaults are DistilBERT's: T = 2, alpha_soft 5, alpha_hard 2, alpha_cos 1;
  the TinyBERT terms are off (0). `soft_loss="ce"` uses the cross-entropy against the
  teacher's distribution instead of the KL (same gradient; the value adds the teacher's
  entropy).
- Task distillation (Hinton et al.) on a fine-tuning task's training data, for every
  task family: `SoftTargets` mixed into the family's program (`DISTILL_PROGRAMS`:
  `TaskDistillation` over `ClassificationProgram`, `TaggingDistillation`,
  `QuestionAnsweringDistillation`, `MultipleChoiceDistillation`), so data, the hard
  loss, metrics, dev evaluation, best/ and the saved layout are the fine-tuning task
  layer's. loss = alpha_hard * the task loss on the gold labels + alpha_soft * T^2 KL on
  the teacher's logits, per item the task loss counts:
      classification   the K logits per sequence (regression: squared error to the
                       teacher's prediction)
      tagging (NER)    the K tag logits per labelled token (a word's first sub-token;
                       ignore-index positions excluded), averaged over labelled tokens
      QA (SQuAD)       (KL(start) + KL(end)) / 2 per window, each over the window's real
                       positions (padding, finfo.min in bertkit's QA logits, excluded)
      multiple choice  the C choices' scores per question
  Each family's `soft_loss_sum` hook picks the student's logits; the rest is shared.

Student. The teacher's config with `student_layers` layers (default half the teacher's)
and optional `student.*` overrides. Student layer i starts from teacher layer
floor(i * L / N): every other layer when N = L / 2 (0, 2, 4, ... as DistilBERT's
"every other layer"), evenly spaced otherwise; embeddings, pooler and heads are copied
too. A narrower student (student.hidden_size) cannot copy weights and starts from
BERT's initialisation; its hidden states meet the teacher's through a learned linear
projection (TinyBERT's W_h), trained with the student and saved beside it as
`distill_projection.safetensors` (so --resume continues it). The intermediate losses map
student hidden state m (0 = embeddings) to teacher hidden state m * L / N and student
layer j's attention to teacher layer (j + 1) * L / N - 1 (TinyBERT's uniform mapping,
the last layers matched).

Teacher. A bertkit or Hugging Face checkpoint, run in eval mode under
`torch.inference_mode` (its outputs are cloned into ordinary tensors before they meet
the student's graph): general distillation takes BERT (model_type "bert"; the student is
a `BertForPreTraining`; any other model_type is refused in one line naming the teacher),
task distillation every model family (BERT, RoBERTa, ELECTRA, ALBERT: the student is the
teacher's head class). General distillation needs the teacher's MLM head for the soft
targets: a checkpoint without one (a bare `BertModel` such as all-MiniLM-L6-v2) is
refused unless `alpha_soft=0`, in which case the student learns from the hidden-state
losses and the hard MLM loss (its MLM head starting fresh). `cache_teacher` stores in
float32 under `OUTPUT/teacher-cache/` (or `cache_dir`) the teacher's outputs of every
training example and epoch (general: one file each under a key hashing the teacher's
weights, the data's recipe, the masking, the seed and what is stored) or its logits of
the whole training set (task: one .npz aligned with the training features, keyed by
teacher weights, training file and encoding; per-position logits of tagging and QA
stored ragged, each window at its own length), so a resumed or repeated run reuses them
and computes the same losses. A task teacher must hold a fine-tuned head of the task's
family whose label map covers the data (one-line error naming the teacher otherwise).

Modules: `config` (the two configs and `build_config`), `losses`, `student` (its config,
layer maps, weight copy), `teacher` (loading), `teacher_cache`, `general` and `task` (the
two modes' programs and runs).
"""

from bertkit.distillation.config import DistillConfig, StudentFields, TaskDistillConfig, build_config
from bertkit.distillation.general import (
    DistillationModel,
    GeneralDistillation,
    distill_general,
    prepare_general,
    resume_general_distillation,
)
from bertkit.distillation.losses import attention_mse, cosine_loss, hidden_mse, soft_target_loss
from bertkit.distillation.student import (
    attention_layer_map,
    hidden_layer_map,
    init_student_from_teacher,
    student_config,
    student_layer_sources,
)
from bertkit.distillation.task import (
    DISTILL_PROGRAMS,
    MultipleChoiceDistillation,
    QuestionAnsweringDistillation,
    SoftTargets,
    TaggingDistillation,
    TaskDistillation,
    TaskDistillResult,
    distill_task,
)
from bertkit.distillation.teacher import load_teacher
from bertkit.distillation.teacher_cache import TeacherCache, load_teacher_logits, save_teacher_logits

__all__ = [
    "DISTILL_PROGRAMS",
    "DistillConfig",
    "DistillationModel",
    "GeneralDistillation",
    "MultipleChoiceDistillation",
    "QuestionAnsweringDistillation",
    "SoftTargets",
    "StudentFields",
    "TaggingDistillation",
    "TaskDistillConfig",
    "TaskDistillResult",
    "TaskDistillation",
    "TeacherCache",
    "attention_layer_map",
    "attention_mse",
    "build_config",
    "cosine_loss",
    "distill_general",
    "distill_task",
    "hidden_layer_map",
    "hidden_mse",
    "init_student_from_teacher",
    "load_teacher",
    "load_teacher_logits",
    "prepare_general",
    "resume_general_distillation",
    "save_teacher_logits",
    "soft_target_loss",
    "student_config",
    "student_layer_sources",
]
