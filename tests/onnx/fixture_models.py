"""Small torchvision-shaped models for the committed ONNX fixtures (tools/export_onnx.py MODULE:ATTR).

Built from torchvision's own blocks at reduced width so the files stay small; the layer structure
(stem, max pooling, residual blocks, depthwise inverted residuals with ReLU6, classifier) is theirs.
A third, small_normalized_prelu_net, holds what exporters leave as constants (normalisation buffers,
PReLU slopes, a scaled residual, a temperature); small_shufflenet_v2 (torchvision's ShuffleNetV2)
and small_super_resolution (PixelUnshuffle, PixelShuffle) the channel rearrangements exporters
write as Reshape -> Transpose -> Reshape chains and DepthToSpace; small_convnext (torchvision's
ConvNeXt) the permute -> LayerNorm -> Linear -> GELU -> Linear -> permute blocks, exported at opset 17
so LayerNorm is one LayerNormalization, and at opset 13, where exporters write it out (ReduceMean,
Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add); SmallLayerNorm2dNet the LayerNorm2d over dim 1 of an
NCHW tensor that detectron2, SAM and the original ConvNeXt write out the same way at every opset;
SmallGroupNormNet the GroupNorm of diffusion UNets, written as Reshape, InstanceNormalization,
Reshape, Mul, Add; SmallCbamNet CBAM's attention and SSD's L2Norm, whose reductions over the
channels export as ReduceMean, ReduceMax and ReduceL2; SmallFocusCropNet YOLOv5's Focus stem and a
UNet's centre-cropped skip connection, spatial Slice ops with steps; SmallSimAmNet SimAM and
reductions along one spatial axis, ReduceSum / ReduceMean / ReduceMax / ReduceL1 over spatial axes
and Pow by 2; SmallCoordAttNet coordinate attention, whose pooled H and W export as Transposes of
the spatial dims and a Concat and Split along H, and a conv run on the transposed map (axial
attention's H <-> W swap) on a non-square input; SmallSamePadNet an EfficientNet ported from
TensorFlow, whose "same" padding is computed from the input's shape at run time. small_vit and small_swin (torchvision's
VisionTransformer and SwinTransformer) are token models, most of whose values are no network
values: they are planned around, not run, and carry no output fixture.
The committed files (model, and input with PyTorch's output) come from, in tests/onnx:

  PYTHONPATH=. /usr/bin/python3 ../../tools/export_onnx.py fixture_models:small_resnet18 \
      data/small_resnet18.onnx --input-shape 1,3,32,32 --dynamic-batch \
      --output-fixture data/small_resnet18.safetensors
  PYTHONPATH=. /usr/bin/python3 ../../tools/export_onnx.py fixture_models:small_mobilenet_v2 \
      data/small_mobilenet_v2.onnx --input-shape 1,3,32,32 --keep-batchnorm --dynamic-batch \
      --output-fixture data/small_mobilenet_v2.safetensors
  PYTHONPATH=. /usr/bin/python3 ../../tools/export_onnx.py fixture_models:small_normalized_prelu_net \
      data/small_normalized_prelu_net.onnx --input-shape 1,3,16,16 \
      --output-fixture data/small_normalized_prelu_net.safetensors
  PYTHONPATH=. /usr/bin/python3 ../../tools/export_onnx.py fixture_models:small_shufflenet_v2 \
      data/small_shufflenet_v2.onnx --input-shape 1,3,32,32 \
      --output-fixture data/small_shufflenet_v2.safetensors
  PYTHONPATH=. /usr/bin/python3 ../../tools/export_onnx.py fixture_models:SmallSuperResolution \
      data/small_super_resolution.onnx --input-shape 1,3,16,16 \
      --output-fixture data/small_super_resolution.safetensors
  PYTHONPATH=. /usr/bin/python3 ../../tools/export_onnx.py fixture_models:small_convnext \
      data/small_convnext.onnx --input-shape 1,3,32,32 --opset 17 \
      --output-fixture data/small_convnext.safetensors
  PYTHONPATH=. /usr/bin/python3 ../../tools/export_onnx.py fixture_models:small_convnext \
      data/small_convnext_opset13.onnx --input-shape 1,3,32,32 --opset 13 \
      --output-fixture data/small_convnext_opset13.safetensors
  PYTHONPATH=. /usr/bin/python3 ../../tools/export_onnx.py fixture_models:SmallLayerNorm2dNet \
      data/small_layernorm2d_net.onnx --input-shape 1,3,32,32 \
      --output-fixture data/small_layernorm2d_net.safetensors
  PYTHONPATH=. /usr/bin/python3 ../../tools/export_onnx.py fixture_models:SmallGroupNormNet \
      data/small_groupnorm_net.onnx --input-shape 1,3,16,16 \
      --output-fixture data/small_groupnorm_net.safetensors
  PYTHONPATH=. /usr/bin/python3 ../../tools/export_onnx.py fixture_models:SmallCbamNet \
      data/small_cbam_net.onnx --input-shape 1,3,16,16 \
      --output-fixture data/small_cbam_net.safetensors
  PYTHONPATH=. /usr/bin/python3 ../../tools/export_onnx.py fixture_models:SmallFocusCropNet \
      data/small_focus_crop_net.onnx --input-shape 1,3,16,16 \
      --output-fixture data/small_focus_crop_net.safetensors
  PYTHONPATH=. /usr/bin/python3 ../../tools/export_onnx.py fixture_models:SmallSimAmNet \
      data/small_simam_net.onnx --input-shape 1,3,16,16 \
      --output-fixture data/small_simam_net.safetensors
  PYTHONPATH=. /usr/bin/python3 ../../tools/export_onnx.py fixture_models:SmallCoordAttNet \
      data/small_coord_att_net.onnx --input-shape 1,3,12,10 \
      --output-fixture data/small_coord_att_net.safetensors
  PYTHONPATH=. /usr/bin/python3 ../../tools/export_onnx.py fixture_models:small_vit \
      data/small_vit.onnx --input-shape 1,3,16,16
  PYTHONPATH=. /usr/bin/python3 ../../tools/export_onnx.py fixture_models:small_swin \
      data/small_swin.onnx --input-shape 1,3,16,16

(python3-torch 1.13, python3-torchvision 0.14: the same bytes again). SmallSamePadNet, TensorFlow's
"same" padding computed at run time, comes from PyTorch 2's TorchScript exporter at opset 17 (the
export that crashed libonnx's inference), with the venv scripts/bench.sh makes (PyTorch 2.15):

  PYTHONPATH=. ../../build-bench/peers-venv/bin/python ../../tools/export_onnx.py \
      fixture_models:SmallSamePadNet data/small_same_pad_net.onnx --input-shape 1,3,18,16 --opset 17 \
      --output-fixture data/small_same_pad_net.safetensors
 record_training.py records one
training step of the MobileNetV2, GroupNorm and LayerNorm2d models (data/*.training.safetensors).
"""
import math

import torch
import torchvision
from torchvision.models.resnet import BasicBlock, ResNet


def small_resnet18(num_classes=10, scale=16):
    """ResNet-18's graph (BasicBlock x [2, 2, 2, 2]) with the widths divided by `scale`."""
    model = ResNet(BasicBlock, [2, 2, 2, 2], num_classes=num_classes)

    def narrow(m):
        for name, child in m.named_children():
            if isinstance(child, torch.nn.Conv2d):
                setattr(m, name, torch.nn.Conv2d(max(child.in_channels // scale, 3 if child.in_channels == 3 else 1),
                                                 child.out_channels // scale, child.kernel_size, child.stride,
                                                 child.padding, bias=child.bias is not None))
            elif isinstance(child, torch.nn.BatchNorm2d):
                setattr(m, name, torch.nn.BatchNorm2d(child.num_features // scale))
            elif isinstance(child, torch.nn.Linear):
                setattr(m, name, torch.nn.Linear(child.in_features // scale, child.out_features))
            else:
                narrow(child)
        return m

    return narrow(model)


def small_mobilenet_v2(num_classes=10):
    """MobileNetV2 at width 0.25 with one block per stage and a 128-channel last conv."""
    setting = [[1, 16, 1, 1], [6, 24, 1, 2], [6, 32, 2, 2], [6, 64, 1, 2], [6, 96, 1, 1], [6, 160, 1, 2], [6, 320, 1, 1]]
    model = torchvision.models.MobileNetV2(num_classes=num_classes, width_mult=0.25,
                                           inverted_residual_setting=setting)
    last = model.features[-1]
    in_channels = last[0].in_channels
    model.features[-1] = torchvision.ops.Conv2dNormActivation(in_channels, 128, kernel_size=1,
                                                              norm_layer=torch.nn.BatchNorm2d,
                                                              activation_layer=torch.nn.ReLU6)
    model.classifier[1] = torch.nn.Linear(128, num_classes)
    return model


class SmallNormalizedPReLUNet(torch.nn.Module):
    """An exported model's constants: ImageNet normalisation kept as buffers ((x - mean) / std),
    PReLU per channel and shared, an EDSR-style scaled residual (0.1 * h) and a temperature."""

    def __init__(self, num_classes=10, width=8):
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1))
        self.stem = torch.nn.Conv2d(3, width, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(width)
        self.act1 = torch.nn.PReLU(width)
        self.conv = torch.nn.Conv2d(width, width, 3, padding=1)
        self.act2 = torch.nn.PReLU()
        self.fc = torch.nn.Linear(width, num_classes)

    def forward(self, x):
        h = self.act1(self.bn(self.stem((x - self.mean) / self.std)))
        h = h + 0.1 * self.act2(self.conv(h))
        h = torch.flatten(torch.nn.functional.adaptive_avg_pool2d(h, 1), 1)
        return self.fc(h) / 2.0


def small_normalized_prelu_net(num_classes=10):
    return SmallNormalizedPReLUNet(num_classes)


def small_shufflenet_v2(num_classes=10):
    """torchvision's ShuffleNetV2 (channel split, channel shuffle of 2 groups) with one block per
    stage and widths 8-16-32-64, last conv 128."""
    return torchvision.models.ShuffleNetV2([1, 1, 1], [8, 16, 32, 64, 128], num_classes=num_classes)


class SmallSuperResolution(torch.nn.Module):
    """ESPCN-shaped: PixelUnshuffle(2) in (a 6-D Reshape -> Transpose -> Reshape in the export), two
    convs, PixelShuffle(6) out (DepthToSpace, CRD)."""

    def __init__(self, upscale=3, width=8):
        super().__init__()
        self.unshuffle = torch.nn.PixelUnshuffle(2)
        self.conv1 = torch.nn.Conv2d(12, width, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(width, 3 * (2 * upscale) ** 2, 3, padding=1)
        self.shuffle = torch.nn.PixelShuffle(2 * upscale)

    def forward(self, x):
        return self.shuffle(self.conv2(torch.tanh(self.conv1(self.unshuffle(x)))))


def small_convnext(num_classes=10):
    """torchvision's ConvNeXt with one block per stage and widths 8-16-32; layer scale 0.5 instead of
    1e-6, so each block's branch shows in the output."""
    from torchvision.models.convnext import CNBlockConfig
    setting = [CNBlockConfig(8, 16, 1), CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)]
    return torchvision.models.ConvNeXt(setting, layer_scale=0.5, num_classes=num_classes)


class LayerNorm2d(torch.nn.Module):
    """Layer norm over the channels of an NCHW tensor as detectron2, SAM and the original ConvNeXt write
    it (a mean over dim 1; exported as ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add at any
    opset). Weight and bias are random so that the affine step shows in the output."""

    def __init__(self, channels, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(1 + 0.25 * torch.randn(channels))
        self.bias = torch.nn.Parameter(0.25 * torch.randn(channels))
        self.eps = eps

    def forward(self, x):
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


class SmallLayerNorm2dNet(torch.nn.Module):
    """The original ConvNeXt's stem (4x4 stride-4 conv, LayerNorm2d) and downsampling (LayerNorm2d,
    2x2 stride-2 conv), then SAM's image-encoder neck (1x1 conv, LayerNorm2d, 3x3 conv, LayerNorm2d)."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 4, stride=4), LayerNorm2d(16))
        self.block = torch.nn.Sequential(torch.nn.Conv2d(16, 16, 7, padding=3, groups=16), torch.nn.GELU())
        self.down = torch.nn.Sequential(LayerNorm2d(16), torch.nn.Conv2d(16, 32, 2, stride=2))
        self.neck = torch.nn.Sequential(torch.nn.Conv2d(32, 24, 1, bias=False), LayerNorm2d(24),
                                        torch.nn.Conv2d(24, 24, 3, padding=1, bias=False), LayerNorm2d(24))

    def forward(self, x):
        x = self.stem(x)
        return self.neck(self.down(x + self.block(x)))


class SmallGroupNormNet(torch.nn.Module):
    """A diffusion UNet's residual block (GroupNorm, SiLU, conv, twice, and the skip), then a
    GroupNorm without affine weights. Exporters write GroupNorm as Reshape, InstanceNormalization,
    Reshape, Mul, Add; the weights are random so that the affine step shows in the output."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.norm1 = torch.nn.GroupNorm(4, 16)
        self.conv1 = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.norm2 = torch.nn.GroupNorm(8, 16)
        self.conv2 = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.out_norm = torch.nn.GroupNorm(2, 16, affine=False)
        with torch.no_grad():
            for norm in (self.norm1, self.norm2):
                norm.weight.copy_(1 + 0.25 * torch.randn(16))
                norm.bias.copy_(0.25 * torch.randn(16))

    def forward(self, x):
        x = self.stem(x)
        h = self.conv1(torch.nn.functional.silu(self.norm1(x)))
        h = self.conv2(torch.nn.functional.silu(self.norm2(h)))
        return self.out_norm(x + h)


class SmallCbamNet(torch.nn.Module):
    """CBAM's block (Woo et al.) after a conv stem: channel attention (average and max pooling through
    one shared MLP, a sigmoid gate), then spatial attention (the mean and the max over the channels,
    a 7x7 conv, a sigmoid gate); then SSD's L2Norm over the channels with a learned per-channel scale,
    written with torch.norm (ReduceL2). The reductions over channels export as ReduceMean, ReduceMax and
    ReduceL2 over axis 1."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.mlp = torch.nn.Sequential(torch.nn.Conv2d(16, 4, 1, bias=False), torch.nn.ReLU(),
                                       torch.nn.Conv2d(4, 16, 1, bias=False))
        self.spatial = torch.nn.Conv2d(2, 1, 7, padding=3, bias=False)
        self.scale = torch.nn.Parameter(1 + 0.25 * torch.randn(16))
        self.head = torch.nn.Conv2d(16, 8, 3, padding=1)

    def forward(self, x):
        x = torch.nn.functional.relu(self.stem(x))
        pooled = (torch.nn.functional.adaptive_avg_pool2d(x, 1), torch.nn.functional.adaptive_max_pool2d(x, 1))
        x = x * torch.sigmoid(self.mlp(pooled[0]) + self.mlp(pooled[1]))
        s = torch.cat([x.mean(1, keepdim=True), x.amax(1, keepdim=True)], 1)
        x = x * torch.sigmoid(self.spatial(s))
        x = x / (torch.norm(x, p=2, dim=1, keepdim=True) + 1e-10) * self.scale[None, :, None, None]
        return self.head(x)


class SmallFocusCropNet(torch.nn.Module):
    """YOLOv5's Focus stem (the four pixel phases x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2]
    and x[..., 1::2, 1::2] concatenated over the channels) and the original UNet's skip connection, whose
    encoder map is centre-cropped to the decoder's smaller one before the concatenation; a last strided
    slice of W with a channel range. They export as Slice ops over the spatial axes with steps 1 and 2."""

    def __init__(self):
        super().__init__()
        self.focus = torch.nn.Conv2d(12, 16, 3, padding=1)
        self.down = torch.nn.Conv2d(16, 16, 3)  # no padding: the map shrinks by 2, as in the original UNet
        self.fuse = torch.nn.Conv2d(32, 8, 3, padding=1)

    def forward(self, x):
        x = torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]], 1)
        x = torch.nn.functional.relu(self.focus(x))
        d = torch.nn.functional.relu(self.down(x))
        y = self.fuse(torch.cat([x[:, :, 1:-1, 1:-1], d], 1))
        return y[:, 2:7, :, 1::2]


class SmallSimAmNet(torch.nn.Module):
    """SimAM (Yang et al.; its authors' code): each activation weighted by the sigmoid of an energy
    from its map's mean and variance, the variance a sum of squares over H and W; then a gate from the
    mean along W plus the max along H, broadcast back over the map (coordinate and strip attention's
    pooling along one axis); then x over its l1 norm over C and H. They export as ReduceMean over H and
    W (global pooling), Pow by 2, ReduceSum over H and W, ReduceMean and ReduceMax over one spatial
    axis and ReduceL1 over C and H."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.head = torch.nn.Conv2d(16, 8, 3, padding=1)
        self.e_lambda = 1e-4

    def forward(self, x):
        x = torch.nn.functional.relu(self.stem(x))
        n = x.shape[2] * x.shape[3] - 1
        d = (x - x.mean(dim=[2, 3], keepdim=True)).pow(2)
        y = d / (4 * (d.sum(dim=[2, 3], keepdim=True) / n + self.e_lambda)) + 0.5
        x = x * torch.sigmoid(y)
        x = x * torch.sigmoid(x.mean(3, keepdim=True) + x.amax(2, keepdim=True))
        x = x / (torch.norm(x, p=1, dim=(1, 2), keepdim=True) + 1)
        return self.head(x)


class SmallCoordAttNet(torch.nn.Module):
    """Coordinate attention (Hou et al., CVPR 2021; its authors' code): the map pooled along W and
    along H, the second transposed to [N, C, W, 1] and concatenated with the first along H, a shared
    1x1 conv, batch norm and hard swish, split back along H, the W half transposed again, and two
    sigmoid gates broadcast over the map. Then a conv on the map with H and W swapped, swapped back."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.conv1 = torch.nn.Conv2d(16, 8, 1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv_h = torch.nn.Conv2d(8, 16, 1)
        self.conv_w = torch.nn.Conv2d(8, 16, 1)
        self.axial = torch.nn.Conv2d(16, 16, (3, 1), padding=(1, 0))
        self.head = torch.nn.Conv2d(16, 8, 3, padding=1)

    def forward(self, x):
        x = torch.nn.functional.relu(self.stem(x))
        h, w = x.shape[2], x.shape[3]
        x_h = x.mean(3, keepdim=True)
        x_w = x.mean(2, keepdim=True).permute(0, 1, 3, 2)
        y = torch.nn.functional.hardswish(self.bn1(self.conv1(torch.cat([x_h, x_w], dim=2))))
        y_h, y_w = torch.split(y, [h, w], dim=2)
        a_h = torch.sigmoid(self.conv_h(y_h))
        a_w = torch.sigmoid(self.conv_w(y_w.permute(0, 1, 3, 2)))
        x = x * a_w * a_h
        x = x + self.axial(x.transpose(2, 3)).transpose(2, 3)
        return self.head(x)


class SamePadConv2d(torch.nn.Conv2d):
    """TensorFlow's "same" padding as models ported from TensorFlow compute it at run time (the
    pattern of timm's Conv2dSame): pad = max((ceil(i / s) - 1) * s + (k - 1) * d + 1 - i, 0) from
    the input's extents, split with the odd pixel after. The exporters write it as Shape, Gather,
    arithmetic, Clip (the max) and Concat feeding a Pad."""

    def forward(self, x):
        ih, iw = x.size()[-2:]
        pads = []
        for i, k, s, d in zip((ih, iw), self.kernel_size, self.stride, self.dilation):
            pads.append(max((math.ceil(i / s) - 1) * s + (k - 1) * d + 1 - i, 0))
        ph, pw = pads
        x = torch.nn.functional.pad(x, [pw // 2, pw - pw // 2, ph // 2, ph - ph // 2])
        return torch.nn.functional.conv2d(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)


class SmallSamePadNet(torch.nn.Module):
    """An EfficientNet ported from TensorFlow, small: strided "same" convolutions (even input, so
    the padding is uneven), a depthwise 5x5 one, a dilated one, and SiLU."""

    def __init__(self):
        super().__init__()
        self.stem = SamePadConv2d(3, 8, 3, stride=2)
        self.dw = SamePadConv2d(8, 8, 5, stride=2, groups=8)
        self.dilated = SamePadConv2d(8, 12, 3, dilation=2)
        self.head = SamePadConv2d(12, 6, 2, stride=1)

    def forward(self, x):
        x = torch.nn.functional.silu(self.stem(x))
        x = torch.nn.functional.silu(self.dw(x))
        x = torch.nn.functional.silu(self.dilated(x))
        return self.head(x)


def small_vit(num_classes=4):
    from torchvision.models.vision_transformer import VisionTransformer

    return VisionTransformer(image_size=16, patch_size=8, num_layers=1, num_heads=1, hidden_dim=8, mlp_dim=8,
                             num_classes=num_classes)


def small_swin(num_classes=4):
    from torchvision.models.swin_transformer import SwinTransformer

    return SwinTransformer(patch_size=[4, 4], embed_dim=8, depths=[1, 1], num_heads=[1, 1], window_size=[2, 2],
                           num_classes=num_classes)
