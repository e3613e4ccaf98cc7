//! How one value is spelled in `fake-nvml.conf`, both ways: [`Key`] (a key's spelling with its
//! writer and reader side by side), [`Value`] (the spelling of each field type) and the
//! checked spellings of PCI addresses and `Symbol:code` errors.

/// One key of a section: its spelling, the values a model gives it, and how one value is read
/// back into the model.
pub(crate) struct Key<T> {
    pub(crate) name: &'static str,
    /// The values to write: none leaves the key out, several repeat it.
    pub(crate) write: fn(&T) -> Vec<String>,
    /// Reads one value into the model.
    pub(crate) read: fn(&mut T, &str) -> Result<(), String>,
}

/// A key whose field's type says how it is spelled ([`Value`]).
macro_rules! key {
    ($name:literal, $x:ident => $place:expr) => {
        Key {
            name: $name,
            write: |$x| Value::write(&$place),
            read: |$x, v| Value::read(&mut $place, v),
        }
    };
}
pub(crate) use key;

/// How a field is spelled as the values of its key.
pub(crate) trait Value {
    fn write(&self) -> Vec<String>;
    fn read(&mut self, v: &str) -> Result<(), String>;
}

/// A field spelled as one value.
pub(crate) trait Scalar: Sized {
    fn show(&self) -> String;
    fn parse(v: &str) -> Result<Self, String>;
}

macro_rules! scalar_values {
    ($($t:ty),*) => {$(
        impl Value for $t {
            fn write(&self) -> Vec<String> {
                vec![self.show()]
            }
            fn read(&mut self, v: &str) -> Result<(), String> {
                *self = Scalar::parse(v)?;
                Ok(())
            }
        }
    )*};
}
scalar_values!(
    u32,
    u64,
    i32,
    bool,
    String,
    (u32, u32),
    super::model::ProcessListKind
);

/// A reading the driver may answer NOT_SUPPORTED for: `unsupported` for `None`, else the
/// value (an omitted key keeps the model's default).
pub(crate) fn write_supported<T: Scalar>(v: &Option<T>) -> Vec<String> {
    vec![
        v.as_ref()
            .map_or_else(|| "unsupported".to_string(), Scalar::show),
    ]
}

/// Reads what [`write_supported`] wrote.
pub(crate) fn read_supported<T: Scalar>(slot: &mut Option<T>, v: &str) -> Result<(), String> {
    *slot = match v {
        "unsupported" => None,
        _ => Some(T::parse(v)?),
    };
    Ok(())
}

/// Left out when `None`.
impl<T: Scalar> Value for Option<T> {
    fn write(&self) -> Vec<String> {
        self.iter().map(Scalar::show).collect()
    }
    fn read(&mut self, v: &str) -> Result<(), String> {
        *self = Some(T::parse(v)?);
        Ok(())
    }
}

/// A sequence, `1,2,3`; never empty.
impl<T: Scalar> Value for Vec<T> {
    fn write(&self) -> Vec<String> {
        vec![self.iter().map(Scalar::show).collect::<Vec<_>>().join(",")]
    }
    fn read(&mut self, v: &str) -> Result<(), String> {
        *self = v
            .split(',')
            .map(|part| T::parse(part.trim()))
            .collect::<Result<_, _>>()?;
        Ok(())
    }
}

/// Decimal or `0x` hex; `max` is `u64::MAX`.
impl Scalar for u64 {
    fn show(&self) -> String {
        self.to_string()
    }
    fn parse(v: &str) -> Result<u64, String> {
        if v.eq_ignore_ascii_case("max") {
            return Ok(u64::MAX);
        }
        let r = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => v.parse::<u64>(),
        };
        r.map_err(|_| format!("not a number: {v:?}"))
    }
}

impl Scalar for u32 {
    fn show(&self) -> String {
        self.to_string()
    }
    fn parse(v: &str) -> Result<u32, String> {
        u32::try_from(u64::parse(v)?).map_err(|_| format!("out of range for u32: {v:?}"))
    }
}

impl Scalar for i32 {
    fn show(&self) -> String {
        self.to_string()
    }
    fn parse(v: &str) -> Result<i32, String> {
        v.parse::<i32>().map_err(|_| format!("not an i32: {v:?}"))
    }
}

/// `0` or `1`.
impl Scalar for bool {
    fn show(&self) -> String {
        u8::from(*self).to_string()
    }
    fn parse(v: &str) -> Result<bool, String> {
        match v {
            "0" => Ok(false),
            "1" => Ok(true),
            _ => Err(format!("must be 0 or 1, got {v:?}")),
        }
    }
}

impl Scalar for String {
    fn show(&self) -> String {
        self.clone()
    }
    fn parse(v: &str) -> Result<String, String> {
        Ok(v.to_string())
    }
}

/// `start:size`.
impl Scalar for (u32, u32) {
    fn show(&self) -> String {
        format!("{}:{}", self.0, self.1)
    }
    fn parse(v: &str) -> Result<(u32, u32), String> {
        let (a, b) = v
            .split_once(':')
            .ok_or_else(|| format!("must be start:size, got {v:?}"))?;
        Ok((u32::parse(a.trim())?, u32::parse(b.trim())?))
    }
}

/// Bytes, or `max` for NVML's "not available".
impl Scalar for super::model::Used {
    fn show(&self) -> String {
        match self {
            Self::Bytes(b) => b.to_string(),
            Self::NotAvailable => "max".to_string(),
        }
    }
    fn parse(v: &str) -> Result<Self, String> {
        match u64::parse(v)? {
            u64::MAX => Ok(Self::NotAvailable),
            b => Ok(Self::Bytes(b)),
        }
    }
}

/// `compute`, `graphics` or `mps`.
impl Scalar for super::model::ProcessListKind {
    fn show(&self) -> String {
        match self {
            Self::Compute => "compute",
            Self::Graphics => "graphics",
            Self::Mps => "mps",
        }
        .to_string()
    }
    fn parse(v: &str) -> Result<Self, String> {
        match v {
            "compute" => Ok(Self::Compute),
            "graphics" => Ok(Self::Graphics),
            "mps" => Ok(Self::Mps),
            _ => Err(format!("must be compute, graphics or mps, got {v:?}")),
        }
    }
}

/// The `error` key, repeated: `Symbol:code`, one per injected error.
pub(crate) fn write_errors(errors: &[(String, u32)]) -> Vec<String> {
    errors.iter().map(|(s, c)| format!("{s}:{c}")).collect()
}

/// Adds one `Symbol:code`.
pub(crate) fn read_error(errors: &mut Vec<(String, u32)>, v: &str) -> Result<(), String> {
    let (sym, code) = v
        .rsplit_once(':')
        .ok_or_else(|| format!("must be Symbol:code, got {v:?}"))?;
    let sym = sym.trim();
    if sym.is_empty() {
        return Err(format!("no symbol name: {v:?}"));
    }
    errors.push((sym.to_string(), u32::parse(code.trim())?));
    Ok(())
}

/// A pid key: a number, `child_of_caller` or `caller` (the pid is resolved at each call).
pub(crate) fn write_pid(pid: u32, child_of_caller: bool, caller: bool) -> Vec<String> {
    vec![match (child_of_caller, caller) {
        (true, _) => "child_of_caller".to_string(),
        (false, true) => "caller".to_string(),
        (false, false) => pid.to_string(),
    }]
}

/// `(pid, child_of_caller, caller)`.
pub(crate) fn read_pid(v: &str) -> Result<(u32, bool, bool), String> {
    match v {
        "child_of_caller" => Ok((0, true, false)),
        "caller" => Ok((0, false, true)),
        _ => Ok((u32::parse(v)?, false, false)),
    }
}

/// Bytes as hex digits (whitespace between them is allowed when read).
pub(crate) fn write_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn read_hex(v: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = v.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits: {v:?}"));
    }
    digits
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|s| u8::from_str_radix(s, 16).ok())
                .ok_or_else(|| format!("bad hex: {v:?}"))
        })
        .collect()
}

/// A PCI address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pci {
    pub domain: u32,
    pub bus: u32,
    pub device: u32,
    pub function: u32,
}

/// `DDDDDDDD:BB:DD.F` (NVML form), `DDDD:BB:DD.F` (sysfs form) or `BB:DD.F`.
pub fn parse_pci(v: &str) -> Result<Pci, String> {
    let bad = || format!("bad pci_bus_id: {v:?}");
    let parts: Vec<&str> = v.split(':').collect();
    let (domain, bus, rest) = match parts.as_slice() {
        [d, b, r] => (*d, *b, *r),
        [b, r] => ("0", *b, *r),
        _ => return Err(bad()),
    };
    let (dev, func) = rest.split_once('.').ok_or_else(bad)?;
    let hex = |s: &str| u32::from_str_radix(s, 16).map_err(|_| bad());
    let pci = Pci {
        domain: hex(domain)?,
        bus: hex(bus)?,
        device: hex(dev)?,
        function: hex(func)?,
    };
    if pci.bus > 0xff || pci.device > 0x1f || pci.function > 7 {
        return Err(bad());
    }
    Ok(pci)
}

/// Removes a trailing comment: `#` at the start or after whitespace.
pub(crate) fn strip_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'#' && (i == 0 || bytes.get(i - 1).is_some_and(|p| p.is_ascii_whitespace())) {
            return line.get(..i).unwrap_or("");
        }
    }
    line
}

/// One half of a pair two keys set (a value of the pair's other half not yet read is
/// `default`'s).
pub(crate) fn read_half<T: Scalar + Copy>(
    pair: &mut Option<(T, T)>,
    default: (T, T),
    second: bool,
    v: &str,
) -> Result<(), String> {
    let mut p = pair.unwrap_or(default);
    *(if second { &mut p.1 } else { &mut p.0 }) = T::parse(v)?;
    *pair = Some(p);
    Ok(())
}

/// Writes a section: its `[header]` (none for the global keys) and its keys.
pub(crate) fn write_section<T>(s: &mut String, header: &str, keys: &[Key<T>], x: &T) {
    if !header.is_empty() {
        s.push_str("\n[");
        s.push_str(header);
        s.push_str("]\n");
    }
    for k in keys {
        for v in (k.write)(x) {
            s.push_str(k.name);
            s.push_str(" = ");
            s.push_str(&v);
            s.push('\n');
        }
    }
}

/// Reads `key = v` of `section` into `x`.
pub(crate) fn read_key<T>(
    keys: &[Key<T>],
    section: &str,
    x: &mut T,
    key: &str,
    v: &str,
) -> Result<(), String> {
    let k = keys
        .iter()
        .find(|k| k.name == key)
        .ok_or_else(|| format!("unknown {section} key {key:?}"))?;
    (k.read)(x, v).map_err(|e| format!("{section} {key}: {e}"))
}
