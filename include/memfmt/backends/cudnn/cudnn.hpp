// memfmt/backends/cudnn/cudnn.hpp - everything of the cuDNN 9 backend (memfmt::cudnn).
#pragma once

#include "backend.hpp"
#include "channel_padding.hpp"
#include "conv_desc.hpp"
#include "descriptor.hpp"
#include "graph.hpp"
#include "graphs.hpp"
#include "plan.hpp"
#include "status.hpp"
#include "tensor_desc.hpp"
