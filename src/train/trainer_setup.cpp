// The trainer's local setup: the constructor loads the data, builds the model, loss,
// optimizer and step strategy, and rejects a config whose data does not fit the model; no
// collective (see TrainingRun). Also the reduction's plan and the placement of
// the gradient buffer, which `mpiddp bench --reduce-only` shares.
#include "mpiddp/train/trainer.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "mpiddp/core/error.hpp"
#include "mpiddp/checkpoint/vocabulary.hpp"
#include "mpiddp/core/threads.hpp"
#include "mpiddp/data/source.hpp"
#include "mpiddp/train/gradient_staging.hpp"
#include "mpiddp/kernels/isa.hpp"
#include "mpiddp/kernels/precision.hpp"
#include "mpiddp/train/fault_injection.hpp"
#include "mpiddp/record/trace_file.hpp"

namespace mpiddp::train {

namespace {

// The set's features are the model's inputs, its targets what the loss takes, and their
// width the model's outputs.
template <typename T>
void check_data_fits(const config::Config& c, const data::Dataset<T>& set, const std::string& key,
                     const nn::Model<T>& model) {
  const Index inputs = model.inputs(), outputs = model.outputs();
  if (set.features != inputs)
    throw ConfigError(key, "has " + std::to_string(set.features) + " features but model.inputs is " +
                               std::to_string(inputs));
  const nn::LossType& loss = *nn::find_loss_type(c.loss.type);  // build_loss found it
  const TargetKind kind = set.target_kind();
  if (!loss.takes(kind)) {
    const nn::LossType* instead = nn::first_loss_type_taking(kind);
    throw ConfigError("loss", loss.name + " needs " + loss.needs + ", but " + key + " (" + set.name +
                                  ") " + target_kind_phrase(kind) +
                                  (instead ? "; use \"" + instead->name + "\"" : ""));
  }
  if (set.target_width() != outputs)
    throw ConfigError("model.layers", "the last layer has " + std::to_string(outputs) +
                                          " outputs but " + key + " has " +
                                          std::to_string(set.target_width()) + " " +
                                          target_width_noun(kind));
  if (set.vocabulary > model.token_vocabulary())
    throw ConfigError(c.layers.front().key + ".vocab", "the model takes token ids below " +
                                                           std::to_string(model.token_vocabulary()) + " but " + key +
                                                           " has a vocabulary of " + std::to_string(set.vocabulary));
}

// optimizer.decay "matrices": the tensors of fewer than two dimensions (biases, the scales
// and shifts of the norms) take no weight decay.
template <typename T>
optim::ParameterRanges vectors_and_scalars(const nn::Model<T>& model) {
  optim::ParameterRanges ranges;
  for (const nn::ParameterTensor& tensor : model.tensors())
    if (tensor.shape.size() < 2) ranges.emplace_back(tensor.offset, tensor.offset + tensor.size());
  return ranges;
}

// What this rank's memory need follows from (memory_plan.hpp), before the model exists: the
// layers' sizes for the per-rank batch, one gathered batch, the sets, and the step's own.
template <typename T>
MemoryFacts rank_memory_facts(const config::Config& config, const nn::Shape& input_shape,
                              const TrainingData<T>& data, const data::Dataset<T>* eval, int world) {
  const nn::ModelSize size = nn::model_size<T>(input_shape, config.layers, data.batch_per_rank);
  MemoryFacts facts;
  facts.parameters = size.parameters;
  facts.gradient_values = size.parameters + kReservedSlots;
  facts.activation_bytes = size.activation_bytes;
  facts.batch_bytes = BatchBuffers<T>::bytes(data.batch_per_rank, data.set.features, data.set.input_kind(),
                                             std::max<Index>(data.set.outputs, eval ? eval->outputs : 0),
                                             data.set.label_positions);
  facts.data_bytes = data.set.bytes() + (eval ? eval->bytes() : 0);
  facts.value_bytes = sizeof(T);
  if (config.precision != "float32") facts.weight_copy_bytes = static_cast<size_t>(size.parameters) * sizeof(uint16_t);
  facts.step_bytes = step_working_bytes<T>(config, world, size.parameters, size.buffer_values);
  facts.staging_values = plan_gradient_staging(size.units).values();
  return facts;
}

}  // namespace

void apply_compute_isa(const std::string& configured) {
  if (configured == "auto") {
    kernels::uncap_isa();
    return;
  }
  kernels::Isa cap = kernels::Isa::kBaseline;
  kernels::find_isa(configured, &cap);  // the parser took only the levels' names
  const std::string lacking = kernels::cpu_lacks(cap);
  if (!lacking.empty()) {
    throw ConfigError("compute.isa", "\"" + configured + "\" needs " + lacking + ", which this CPU lacks (it runs " +
                                         kernels::isa_names_text(kernels::cpu_isas(), ", ") +
                                         "); use \"auto\" or one of those");
  }
  kernels::cap_isa(cap);
}

void apply_compute_precision(const std::string& configured) {
  kernels::Precision precision = kernels::Precision::kFloat32;
  kernels::find_precision(configured, &precision);  // the parser took only the precisions' names
  if (precision == kernels::Precision::kBf16) {
    const std::string lacking = kernels::bf16_products_lack();
    if (!lacking.empty())
      throw ConfigError("compute.precision", "\"bf16\" needs " + lacking +
                                                 ", which this process lacks; \"bf16_reference\" rounds the same "
                                                 "way on any CPU (slower), or use \"float32\"");
  }
  kernels::use_precision(precision);
}

template <typename T>
TrainingData<T>::TrainingData(const config::Config& config, const distributed::Communicator& comm)
    : set(data::load_source<T>(config.train_data, config.seed, "train")),
      sampler(set.samples, comm.rank(), comm.size(), config.shuffle, config.drop_last, config.seed),
      batch_per_rank(config.per_rank_batch(comm.size())) {}

template <typename T>
Trainer<T>::Trainer(const config::Config& config, distributed::Communicator& comm, TrainOptions options)
    : config_(config),
      comm_(comm),
      options_(options),
      data_(config, comm),
      replica_(comm, config.reduce),
      observer_(config.trace, options.profile) {
  // Before anything computes: no kernel above compute.isa runs in this process from here on.
  apply_compute_isa(config.isa);
  apply_compute_precision(config.precision);
  // Deterministic mode's own fit comes first: its message says why accumulate_steps or the
  // world size does not fit the chunks, which the checks below would word less precisely.
  config::check_deterministic_fits(config, comm.size(), data_.set.samples);
  if (data_.batch_per_rank % config.accumulate_steps != 0)
    throw ConfigError("accumulate_steps", "accumulate_steps " +
                                              std::to_string(config.accumulate_steps) +
                                              " does not divide the per-rank batch " +
                                              std::to_string(data_.batch_per_rank));
  std::optional<data::Dataset<T>> eval;  // data.eval, the evaluator's once the step exists
  if (config.eval_data) eval = data::load_source<T>(*config.eval_data, config.seed, "eval");
  const nn::Shape input_shape = config::model_input_shape(config, data_.set.shape, data_.set.features, "data.train");
  const bool shares_node_memory = replica_.reducer.shares_node_memory();
  const bool compressed = replica_.reducer.compression() != distributed::Compression::kNone;
  check_modes_combine(config, comm, shares_node_memory);
  const distributed::ShardScope scope = step_shard_scope(config, comm, shares_node_memory, compressed);
  // What this rank will hold, against memory.limit_mb before any of it is allocated.
  memory_facts_ = rank_memory_facts<T>(config, input_shape, data_, eval ? &*eval : nullptr, comm.size());
  memory_need_ = memory_need_in_scope(config, comm, scope, compressed, memory_facts_);
  check_memory_limit(config.memory_limit_mb, memory_need_,
                     comm.size() > 1 && scope == distributed::ShardScope::kNone &&
                         !optimizer_shard_refusal(config, comm, shares_node_memory));
  replica_.optimizer = std::make_unique<optim::Optimizer<T>>(config.optimizer, memory_facts_.parameters,
                                                          distributed::part_exchange(comm, scope));
  // Extra gradient slots carry the loss and the stop vote (kReservedSlots, step_strategy.hpp).
  // With reduce.shard "parameters" the model holds the optimizer's part of the parameters
  // alone, from the start (Note [parameters gathered by unit]).
  std::optional<nn::ParameterPart> part;
  if (config.reduce.shard_parameters) part = nn::ParameterPart{replica_.optimizer->begin(), replica_.optimizer->end()};
  replica_.model = std::make_unique<nn::Model<T>>(input_shape, config.layers, data_.batch_per_rank,
                                                  kReservedSlots, part);
  plan_reduction(replica_.reducer, *replica_.model);
  replica_.loss = nn::build_loss<T>(config.loss);
  check_data_fits(config, data_.set, "data.train", *replica_.model);
  if (eval) check_data_fits(config, *eval, "data.eval", *replica_.model);
  // One evaluation reads the eval set's targets as the training set's: the same kind, and as
  // many per sample (a class per sample and one per position can give the same width).
  if (eval && (eval->target_kind() != data_.set.target_kind() || eval->label_positions != data_.set.label_positions))
    throw ConfigError("data.eval", "its targets: " + std::to_string(eval->label_positions) + " per sample (it " +
                                       target_kind_phrase(eval->target_kind()) + "), but data.train's: " +
                                       std::to_string(data_.set.label_positions) + " (it " +
                                       target_kind_phrase(data_.set.target_kind()) + ")");
  check_evaluation_metrics(config, replica_.loss->is_classification());
  if (data_.sampler.per_rank() == 0)
    throw ConfigError("data.train.samples", "fewer samples than ranks with drop_last: every "
                                            "rank would get an empty epoch");
  if (config.optimizer.decay == optim::DecayRule::kMatrices) replica_.optimizer->exempt_from_decay(vectors_and_scalars(*replica_.model));
  replica_.pipeline = std::make_unique<BatchPipeline<T>>(*replica_.model, *replica_.loss, data_.set, data_.batch_per_rank,
                                          std::max<Index>(data_.set.outputs, eval ? eval->outputs : 0),
                                          observer_.phases(), config.train_data.augment, config.prefetch);
  replica_.pipeline->training_pass().seed = config.seed;
  step_ = make_step_strategy<T>({config, comm, *replica_.pipeline, replica_.reducer, *replica_.optimizer, replica_.statistics,
                                 data_.batch_per_rank, data_.sampler});
  const ThreadChoice chosen =
      choose_threads(config.threads, std::getenv("OMP_NUM_THREADS"), affinity_cores(), node_cores(), comm.ranks_on_node(),
                     kernels::typical_product_multiply_adds(replica_.model->gemm_calls(data_.batch_per_rank)));
  threads_ = step_->threads(chosen.threads);
  use_threads(threads_);
  kernels::use_one_thread_below(chosen.one_thread_below);
  // Only rank 0 writes the logs; the other ranks hold disabled ones. Every file and the
  // TensorBoard directory are created now, before the first step.
  record_ = std::make_unique<record::RunRecord>(config, comm, options_.quiet, options_.restart);
  // An unwritable trace.path is known now, not after the run (rank 0 writes the file).
  if (observer_.trace().enabled() && comm.rank() == 0) record::check_trace_writable(config.trace.path);
  checkpoint::RunIdentity identity;  // what a checkpoint must match to be resumed
  identity.model = replica_.model->describe();
  identity.dtype = config.dtype;
  identity.config = checkpoint::resume_config(config);
  identity.global_batch = data_.batch_per_rank * comm.size();
  identity.train_samples = data_.set.samples;
  identity.steps_per_epoch = data_.sampler.steps_per_epoch(data_.batch_per_rank);
  identity.world_size = comm.size();
  identity.vocabulary = checkpoint::vocabulary_metadata(data_.set.tokenizer.get());
  checkpointer_ = std::make_unique<Checkpointer<T>>(config, comm, *replica_.model, *replica_.optimizer, observer_, record_->log(),
                                                    std::move(identity));
  evaluator_ = std::make_unique<Evaluator<T>>(
      typename Evaluator<T>::Parts{config, comm, data_.set, *step_, *replica_.optimizer, *replica_.model, *replica_.loss, record_->log(), observer_,
                                   options_.keep_history, options_.quiet,
                                   [this](const checkpoint::TrainingPosition& at) { save_checkpoint(at, /*best=*/true); }},
      std::move(eval));
  guard_ = std::make_unique<StepGuard<T>>(config.faults, comm, *replica_.model, *replica_.optimizer, *step_, record_->log(), options_.quiet);
  inject_setup_fault(config.faults.inject, comm.rank());
}

template <typename T>
void plan_reduction(distributed::GradientReducer<T>& reducer, const nn::Model<T>& model) {
  reducer.set_tensor_begins(model.tensor_bounds());  // P: where the reserved slots begin
  reducer.keep_exact_from(static_cast<size_t>(model.parameter_count()));
}

template <typename T>
void place_for_reduction(distributed::GradientReducer<T>& reducer, nn::Model<T>& model) {
  if (T* shared = reducer.allocate_shared_buffer(static_cast<size_t>(model.gradient_count())))
    model.place_gradients(shared);
}

template struct TrainingData<float>;
template struct TrainingData<double>;
template Trainer<float>::Trainer(const config::Config&, distributed::Communicator&, TrainOptions);
template Trainer<double>::Trainer(const config::Config&, distributed::Communicator&, TrainOptions);
template void plan_reduction(distributed::GradientReducer<float>&, const nn::Model<float>&);
template void plan_reduction(distributed::GradientReducer<double>&, const nn::Model<double>&);
template void place_for_reduction(distributed::GradientReducer<float>&, nn::Model<float>&);
template void place_for_reduction(distributed::GradientReducer<double>&, nn::Model<double>&);

}  // namespace mpiddp::train
