//! dtype.rs - weight formats, numbered by their GGUF/ggml type ids (sinter.h's SINTER_DTYPE_*).
//!
//! `quantized_matmul` takes one of these; SEMANTICS.md lists which are supported. The ids are fixed
//! by GGUF, so `DType::Q4_0 as u32 == 2` is what the C ABI receives. The enum has the variants,
//! discriminants and methods (`size_of_block`, `block_size`, `is_quantized`, `bits_per_weight`,
//! `from_gguf_type_id`) of yule-core 0.1.0's `DType`, which yule-gpu's trait takes; it lacks that
//! type's serde derives (the crate has no dependencies).

/// A GGUF tensor type. Ids 4, 5 and 31..33 were removed from GGUF and are not listed.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum DType {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
}

impl DType {
    /// Every listed type, in id order.
    pub const ALL: [DType; 31] = [
        DType::F32,
        DType::F16,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q8_0,
        DType::Q8_1,
        DType::Q2_K,
        DType::Q3_K,
        DType::Q4_K,
        DType::Q5_K,
        DType::Q6_K,
        DType::Q8_K,
        DType::IQ2_XXS,
        DType::IQ2_XS,
        DType::IQ3_XXS,
        DType::IQ1_S,
        DType::IQ4_NL,
        DType::IQ3_S,
        DType::IQ2_S,
        DType::IQ4_XS,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F64,
        DType::IQ1_M,
        DType::BF16,
        DType::TQ1_0,
        DType::TQ2_0,
    ];

    /// The GGUF type id.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// The type with GGUF id `id`; None for an id GGUF does not (or no longer) define.
    pub fn from_id(id: u32) -> Option<DType> {
        DType::ALL.iter().copied().find(|d| d.id() == id)
    }

    /// `from_id` under yule-core's name.
    pub fn from_gguf_type_id(id: u32) -> Option<DType> {
        DType::from_id(id)
    }

    /// Weights per block: 1 for the scalar types, 32 for the first block formats and IQ4_NL, 256
    /// for the K-quants, the other I-quants and the ternary types (support/DType.cpp's table).
    pub fn block_size(&self) -> usize {
        use DType::*;
        match self {
            F32 | F16 | BF16 | F64 | I8 | I16 | I32 | I64 => 1,
            Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q8_1 | IQ4_NL => 32,
            Q2_K | Q3_K | Q4_K | Q5_K | Q6_K | Q8_K | IQ2_XXS | IQ2_XS | IQ3_XXS | IQ1_S
            | IQ3_S | IQ2_S | IQ4_XS | IQ1_M | TQ1_0 | TQ2_0 => 256,
        }
    }

    /// Bytes of one block (of `block_size()` weights).
    pub fn size_of_block(&self) -> usize {
        use DType::*;
        match self {
            I8 => 1,
            F16 | BF16 | I16 => 2,
            F32 | I32 => 4,
            F64 | I64 => 8,
            Q4_0 | IQ4_NL => 18,
            Q4_1 => 20,
            Q5_0 => 22,
            Q5_1 => 24,
            Q8_0 => 34,
            Q8_1 => 36,
            IQ1_S => 50,
            TQ1_0 => 54,
            IQ1_M => 56,
            IQ2_XXS | TQ2_0 => 66,
            IQ2_XS => 74,
            IQ2_S => 82,
            Q2_K => 84,
            IQ3_XXS => 98,
            Q3_K | IQ3_S => 110,
            IQ4_XS => 136,
            Q4_K => 144,
            Q5_K => 176,
            Q6_K => 210,
            Q8_K => 292,
        }
    }

    /// True for the block formats; false for the float and integer types.
    pub fn is_quantized(&self) -> bool {
        self.block_size() > 1
    }

    /// Bits per weight: 8 * size_of_block / block_size (4.5 for Q4_0, 32 for F32).
    pub fn bits_per_weight(&self) -> f32 {
        (self.size_of_block() * 8) as f32 / self.block_size() as f32
    }
}
