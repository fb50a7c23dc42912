# The PyTorch UNet the fixture recorders compare graph/models.hpp's unet() with: milesial's
# Pytorch-UNet (bilinear=False), module names equal to the network's node names, so state_dict keys
# are its parameter names. The skip concatenation is a module (Cat) so that forward hooks see it.
import torch
from torch import nn


class Cat(nn.Module):
    def forward(self, *xs):
        return torch.cat(xs, dim=1)


class DoubleConv(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.double_conv = nn.Sequential(
            nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(),
            nn.Conv2d(c_out, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU())

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(c_in, c_out))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    """ConvTranspose2d 2x2/2 with bias halves the channels; the skip comes first in the concat."""

    def __init__(self, c_in, c_out):
        super().__init__()
        self.up = nn.ConvTranspose2d(c_in, c_in // 2, 2, stride=2)
        self.cat = Cat()
        self.conv = DoubleConv(c_in, c_out)

    def forward(self, x, skip):
        return self.conv(self.cat(skip, self.up(x)))


class OutConv(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 1)

    def forward(self, x):
        return self.conv(x)


class UNet(nn.Module):
    """Channels w, 2w, .. 16w down the encoder (milesial's is w = 64)."""

    def __init__(self, w, classes):
        super().__init__()
        self.inc = DoubleConv(3, w)
        self.down1, self.down2, self.down3, self.down4 = (Down(w << i, w << (i + 1)) for i in range(4))
        self.up1, self.up2, self.up3, self.up4 = (Up(w << (4 - i), w << (3 - i)) for i in range(4))
        self.outc = OutConv(w, classes)

    def forward(self, x):
        skips = [self.inc(x)]
        for down in (self.down1, self.down2, self.down3, self.down4):
            skips.append(down(skips[-1]))
        h = skips[4]
        for i, up in enumerate((self.up1, self.up2, self.up3, self.up4)):
            h = up(h, skips[3 - i])
        return self.outc(h)
