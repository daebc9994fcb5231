//! dtype.rs - weight formats, numbered by their GGUF/ggml type ids (sinter.h's SINTER_DTYPE_*).
//!
//! `quantized_matmul` takes one of these; SEMANTICS.md lists which are supported. The ids are fixed
//! by GGUF, so `DType::Q4_0 as u32 == 2` is what the C ABI receives.

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
}
