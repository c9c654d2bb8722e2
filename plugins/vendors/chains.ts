/**
 * Offline vendor tables (chain id → the vendor's network slug or path), copied from eRPC's
 * built-in tables (github.com/erpc/erpc thirdparty/*.go at 2f9ecef, August 2026), which are what
 * eRPC itself falls back to before (or without) fetching a vendor's live list. svc never fetches
 * them: a chain missing here is a chain that vendor does not serve through svc (declare the
 * upstream with its full URL instead). Data only; the URL rules are in ./catalog.ts.
 */

/** Chain id → slug, per table vendor. */
export const VENDOR_CHAINS: Readonly<Record<string, Readonly<Record<number, string>>>> = {
  /** subdomain: https://<slug>.g.alchemy.com/v2/<apiKey> */
  alchemy: { 1: 'eth-mainnet', 10: 'opt-mainnet', 30: 'rootstock-mainnet', 31: 'rootstock-testnet', 56: 'bnb-mainnet', 97: 'bnb-testnet',
    100: 'gnosis-mainnet', 130: 'unichain-mainnet', 137: 'polygon-mainnet', 143: 'monad-mainnet', 146: 'sonic-mainnet', 196: 'xlayer-mainnet',
    204: 'opbnb-mainnet', 232: 'lens-mainnet', 252: 'frax-mainnet', 288: 'boba-mainnet', 300: 'zksync-sepolia', 324: 'zksync-mainnet',
    360: 'shape-mainnet', 480: 'worldchain-mainnet', 510: 'synd-mainnet', 545: 'flow-testnet', 592: 'astar-mainnet', 747: 'flow-mainnet',
    869: 'worldmobilechain-mainnet', 919: 'mode-sepolia', 988: 'stable-mainnet', 998: 'hyperliquid-testnet', 999: 'hyperliquid-mainnet',
    1088: 'metis-mainnet', 1101: 'polygonzkevm-mainnet', 1284: 'moonbeam-mainnet', 1301: 'unichain-sepolia', 1315: 'story-aeneid',
    1328: 'sei-testnet', 1329: 'sei-mainnet', 1439: 'injective-testnet', 1514: 'story-mainnet', 1672: 'pharos-mainnet', 1776: 'injective-mainnet',
    1868: 'soneium-mainnet', 1946: 'soneium-minato', 1952: 'xlayer-testnet', 2020: 'ronin-mainnet', 2201: 'stable-testnet',
    2442: 'polygonzkevm-cardona', 2523: 'frax-sepolia', 2741: 'abstract-mainnet', 3636: 'botanix-testnet', 3637: 'botanix-mainnet',
    4114: 'citrea-mainnet', 4153: 'rise-mainnet', 4157: 'crossfi-testnet', 4158: 'crossfi-mainnet', 4217: 'tempo-mainnet', 4326: 'megaeth-mainnet',
    4801: 'worldchain-sepolia', 5000: 'mantle-mainnet', 5003: 'mantle-sepolia', 5115: 'citrea-testnet', 5330: 'superseed-mainnet',
    5371: 'settlus-mainnet', 5373: 'settlus-septestnet', 5611: 'opbnb-testnet', 6343: 'megaeth-testnet', 6900: 'anime-sepolia',
    7000: 'zetachain-mainnet', 7001: 'zetachain-testnet', 8453: 'base-mainnet', 9745: 'plasma-mainnet', 9746: 'plasma-testnet',
    10143: 'monad-testnet', 10200: 'gnosis-chiado', 11011: 'shape-sepolia', 11124: 'abstract-testnet', 14601: 'sonic-testnet', 28882: 'boba-sepolia',
    33111: 'apechain-curtis', 33139: 'apechain-mainnet', 34443: 'mode-mainnet', 36900: 'adi-mainnet', 37111: 'lens-sepolia', 42018: 'mythos-mainnet',
    42161: 'arb-mainnet', 42220: 'celo-mainnet', 42431: 'tempo-moderato', 43113: 'avax-fuji', 43114: 'avax-mainnet', 46630: 'robinhood-testnet',
    53302: 'superseed-sepolia', 57054: 'sonic-blaze', 57073: 'ink-mainnet', 59141: 'linea-sepolia', 59144: 'linea-mainnet', 60808: 'bob-mainnet',
    69000: 'anime-mainnet', 80002: 'polygon-amoy', 80069: 'berachain-bepolia', 80094: 'berachain-mainnet', 81457: 'blast-mainnet',
    84532: 'base-sepolia', 99999: 'adi-testnet', 202601: 'ronin-saigon', 323432: 'worldmobile-testnet', 421614: 'arb-sepolia',
    510525: 'clankermon-mainnet', 534351: 'scroll-sepolia', 534352: 'scroll-mainnet', 560048: 'eth-hoodi', 613419: 'galactica-mainnet',
    685685: 'gensyn-testnet', 685689: 'gensyn-mainnet', 688689: 'pharos-atlantic', 737373: 'katana-bokuto', 747474: 'katana-mainnet',
    763373: 'ink-sepolia', 808813: 'bob-sepolia', 843843: 'galactica-cassiopeia', 2019775: 'jovay-testnet', 5042002: 'arc-testnet',
    5734951: 'jovay-mainnet', 6985385: 'humanity-mainnet', 7080969: 'humanity-testnet', 7777777: 'zora-mainnet', 11142220: 'celo-sepolia',
    11155111: 'eth-sepolia', 11155420: 'opt-sepolia', 11155931: 'rise-testnet', 168587773: 'blast-sepolia', 351243127: 'xmtp-ropsten',
    666666666: 'degen-mainnet', 728126428: 'tron-mainnet', 999999999: 'zora-sepolia', 3448148188: 'tron-testnet' },
  /** path: https://rpc.ankr.com/<slug>/<apiKey> */
  ankr: { 1: 'eth', 10: 'optimism', 14: 'flare', 40: 'telos', 50: 'xdc', 51: 'xdc_testnet', 56: 'bsc', 57: 'syscoin', 88: 'velas', 100: 'gnosis',
    128: 'heco', 137: 'polygon', 196: 'xlayer', 199: 'bttc', 239: 'tac', 250: 'fantom', 324: 'zksync_era', 570: 'rollux', 1088: 'metis',
    1101: 'polygon_zkevm', 1116: 'core', 1284: 'moonbeam', 1329: 'sei_evm', 1514: 'story_mainnet', 1559: 'tenet_evm', 1923: 'swell',
    2222: 'kava_evm', 4689: 'iotex', 5000: 'mantle', 5165: 'bahamut', 5201: 'electroneum', 7332: 'horizen_eon', 7887: 'kinto', 8217: 'kaia',
    8453: 'base', 8822: 'iota_evm', 16661: '0g_mainnet_evm', 42161: 'arbitrum', 42170: 'arbitrum_nova', 42220: 'celo', 42793: 'etherlink_mainnet',
    43114: 'avalanche', 59144: 'linea', 81457: 'blast', 88888: 'chiliz', 167000: 'taiko', 534352: 'scroll', 660279: 'xai' },
  /** subdomain: https://<slug>.blastapi.io/<apiKey> (ava-*: + /ext/bc/C/rpc) */
  blastapi: { 1: 'eth-mainnet', 10: 'optimism-mainnet', 30: 'rootstock-mainnet', 31: 'rootstock-testnet', 56: 'bsc-mainnet', 66: 'oktc-mainnet',
    97: 'bsc-testnet', 100: 'gnosis-mainnet', 111: 'dymension-testnet', 130: 'unichain-mainnet', 137: 'polygon-mainnet', 146: 'sonic-mainnet',
    204: 'opbnb-mainnet', 250: 'fantom-mainnet', 300: 'zksync-sepolia', 324: 'zksync-mainnet', 360: 'shape-mainnet', 480: 'worldchain-mainnet',
    592: 'astar', 919: 'mode-sepolia', 1088: 'metis-mainnet', 1100: 'dymension-mainnet', 1101: 'polygon-zkevm-mainnet', 1231: 'rivalz-testnet',
    1284: 'moonbeam', 1301: 'unichain-sepolia', 1328: 'sei-testnet', 1329: 'sei-mainnet', 1868: 'soneium-mainnet', 1946: 'soneium-sepolia',
    2020: 'ronin-mainnet', 2442: 'polygon-zkevm-cardona', 2741: 'abstract-mainnet', 4157: 'crossfi-testnet', 4158: 'crossfi-mainnet',
    4801: 'worldchain-sepolia', 5000: 'mantle-mainnet', 5003: 'mantle-sepolia', 5611: 'opbnb-testnet', 7000: 'zetachain-mainnet',
    7001: 'zetachain-testnet', 8453: 'base-mainnet', 9001: 'evmos-mainnet', 10200: 'gnosis-chiado', 11011: 'shape-sepolia',
    11124: 'abstract-testnet', 17000: 'eth-holesky', 33111: 'apechain-curtis', 33139: 'apechain-mainnet', 34443: 'mode-mainnet',
    37111: 'lens-testnet', 42161: 'arbitrum-one', 42170: 'arbitrum-nova', 43113: 'ava-testnet', 43114: 'ava-mainnet', 53302: 'superseed-sepolia',
    57054: 'sonic-blaze', 59141: 'linea-sepolia', 59144: 'linea-mainnet', 60808: 'bob-mainnet', 62298: 'citrea-signet', 80001: 'polygon-testnet',
    80002: 'polygon-amoy', 80094: 'berachain-mainnet', 81457: 'blastl2-mainnet', 84532: 'base-sepolia', 421614: 'arbitrum-sepolia',
    534351: 'scroll-sepolia', 534352: 'scroll-mainnet', 763373: 'ink-sepolia', 808813: 'bob-sepolia', 11155111: 'eth-sepolia',
    11155420: 'optimism-sepolia', 18071918: 'mande-mainnet', 168587773: 'blastl2-sepolia', 994873017: 'lumia-mainnet', 1952959480: 'lumia-testnet',
    11297108099: 'palm-testnet', 11297108109: 'palm-mainnet' },
  /** path: https://svc.blockdaemon.com/<slug>, key as a Bearer token */
  blockdaemon: { 1: 'ethereum/mainnet/native', 10: 'optimism/mainnet/native/http-rpc', 137: 'polygon/mainnet/native/http-rpc',
    195: 'xlayer/testnet/native', 196: 'xlayer/mainnet/native', 8453: 'base/mainnet/native/http-rpc', 10143: 'monad/testnet/native',
    42161: 'arbitrum/mainnet-one/native/http-rpc', 43113: 'avalanche/testnet/native/ext/bc/c/eth', 43114: 'avalanche/mainnet/native/ext/bc/c/eth',
    57073: 'ink/mainnet/native', 80002: 'polygon/amoy/native/http-rpc', 84532: 'base/testnet/native/http-rpc',
    421614: 'arbitrum/sepolia-one/native/http-rpc', 560048: 'ethereum/hoodi/native', 11155111: 'ethereum/sepolia/native',
    728126428: 'tron/mainnet/native/jsonrpc', 3448148188: 'tron/nile/native/jsonrpc' },
  /** subdomain: https://<slug>.blockpi.network/v1/rpc/<apiKey> */
  blockpi: { 1: 'ethereum', 10: 'optimism', 25: 'cronos', 56: 'bsc', 82: 'meter', 88: 'viction', 97: 'bsc-testnet', 100: 'gnosis', 126: 'movement',
    130: 'unichain', 137: 'polygon', 196: 'xlayer', 248: 'oasys', 250: 'fantom', 300: 'zksync-era-sepolia', 324: 'zksync-era', 334: 't3rn-b2n',
    1001: 'kaia-kairos', 1030: 'conflux-espace', 1088: 'metis', 1101: 'polygon-zkevm', 1301: 'unichain-sepolia', 1329: 'sei-evm', 1514: 'story',
    2442: 'polygon-zkevm-cardona', 2741: 'abstract', 4200: 'merlin', 5000: 'mantle', 7000: 'zetachain-evm', 7001: 'zetachain-athens-evm',
    8217: 'kaia', 8453: 'base', 10143: 'monad-testnet', 17000: 'ethereum-holesky', 42161: 'arbitrum', 42170: 'arbitrum-nova', 42220: 'celo',
    43113: 'avalanche-fuji', 43114: 'avalanche', 57054: 'sonic-blaze', 57073: 'ink', 59141: 'linea-sepolia', 59144: 'linea', 80002: 'polygon-amoy',
    80094: 'berachain', 81457: 'blast', 84532: 'base-sepolia', 167000: 'taiko', 167009: 'taiko-hekla', 421614: 'arbitrum-sepolia',
    534351: 'scroll-sepolia', 534352: 'scroll', 686868: 'merlin-testnet', 11155111: 'ethereum-sepolia', 11155420: 'optimism-sepolia',
    168587773: 'blast-sepolia' },
  /** network: https://lb.drpc.org/ogrpc?network=<slug>&dkey=<apiKey> */
  drpc: { 1: 'ethereum', 10: 'optimism', 25: 'cronos', 30: 'rootstock', 31: 'rootstock-testnet', 40: 'telos', 56: 'bsc', 88: 'viction',
    89: 'viction-testnet', 97: 'bsc-testnet', 100: 'gnosis', 109: 'shibarium', 122: 'fuse', 130: 'unichain', 133: 'hashkey-testnet', 137: 'polygon',
    143: 'monad-mainnet', 146: 'sonic', 169: 'manta-pacific', 177: 'hashkey', 196: 'xlayer', 199: 'bittorrent', 204: 'opbnb', 232: 'lens',
    239: 'tac', 240: 'cronos-zkevm-testnet', 250: 'fantom', 252: 'fraxtal', 255: 'kroma', 288: 'boba-eth', 291: 'orderly', 300: 'zksync-sepolia',
    314: 'filecoin', 324: 'zksync', 338: 'cronos-testnet', 388: 'cronos-zkevm', 480: 'worldchain', 919: 'mode-testnet', 945: 'bittensor-testnet',
    964: 'bittensor', 998: 'hyperliquid-testnet', 999: 'hyperliquid', 1088: 'metis', 1100: 'dymension', 1101: 'polygon-zkevm', 1111: 'wemix',
    1112: 'wemix-testnet', 1114: 'core-testnet', 1116: 'core', 1135: 'lisk', 1284: 'moonbeam', 1285: 'moonriver', 1301: 'unichain-sepolia',
    1315: 'story-aeneid-testnet', 1328: 'sei-testnet', 1329: 'sei', 1750: 'metall2', 1868: 'soneium', 1923: 'swell', 1924: 'swell-testnet',
    1946: 'soneium-minato', 1952: 'xlayer-testnet', 2020: 'ronin', 2222: 'kava', 2288: 'moca', 2345: 'goat-mainnet-alpha',
    2442: 'polygon-zkevm-cardona', 2523: 'fraxtal-testnet', 2741: 'abstract', 2818: 'morph', 4002: 'fantom-testnet', 4200: 'merlin',
    4202: 'lisk-sepolia', 4217: 'tempo-mainnet', 4326: 'megaeth', 5000: 'mantle', 5003: 'mantle-sepolia', 5330: 'superseed', 7000: 'zeta-chain',
    7001: 'zeta-chain-testnet', 8217: 'klaytn', 8453: 'base', 9745: 'plasma', 10143: 'monad-testnet', 10200: 'gnosis-chiado',
    11124: 'abstract-sepolia', 11235: 'haqq', 13371: 'immutable-zkevm', 13473: 'immutable-zkevm-testnet', 14601: 'sonic-testnet-v2',
    16602: '0g-galileo-testnet', 16661: '0g-mainnet', 17000: 'holesky', 25327: 'everclear', 31611: 'mezo-testnet', 31612: 'mezo',
    33111: 'apechain-curtis', 33139: 'apechain', 34443: 'mode', 36888: 'abcore', 37111: 'lens-testnet', 42161: 'arbitrum', 42170: 'arbitrum-nova',
    42220: 'celo', 42431: 'tempo-moderato-testnet', 43111: 'hemi', 43113: 'avalanche-fuji', 43114: 'avalanche', 44787: 'celo-alfajores',
    46630: 'robinhood-testnet', 48898: 'zircuit-garfield-testnet', 48900: 'zircuit-mainnet', 53302: 'superseed-sepolia', 57073: 'ink',
    59141: 'linea-sepolia', 59144: 'linea', 60808: 'bob', 80002: 'polygon-amoy', 80069: 'berachain-bepolia', 80094: 'berachain', 81457: 'blast',
    84532: 'base-sepolia', 97476: 'doma-testnet', 97477: 'doma', 98866: 'plume', 102030: 'creditcoin', 102031: 'creditcoin-testnet', 167000: 'taiko',
    167013: 'taiko-hoodi', 202601: 'ronin-saigon', 314159: 'filecoin-calibration', 421614: 'arbitrum-sepolia', 534351: 'scroll-sepolia',
    534352: 'scroll', 543210: 'zero', 560048: 'hoodi', 737373: 'katana-testnet', 743111: 'hemi-testnet', 747474: 'katana', 763373: 'ink-sepolia',
    808813: 'bob-testnet', 1440000: 'xrpl', 5042002: 'arc-testnet', 6281971: 'dogeos-testnet', 7777777: 'zora', 11142220: 'celo-sepolia',
    11155111: 'sepolia', 11155420: 'optimism-sepolia', 728126428: 'tron', 1666600000: 'harmony-0' },
  /** subdomain: https://<slug>.dwellir.com/<apiKey> */
  dwellir: { 1: 'api-ethereum-mainnet.n', 10: 'api-optimism-mainnet-archive.n', 25: 'api-cronos-mainnet-archive.n', 44: 'api-darwiniacrab.n',
    46: 'api-darwinia.n', 50: 'api-xdc-mainnet.n', 56: 'api-bsc-mainnet-full.n', 88: 'api-viction-mainnet.n', 97: 'api-bsc-testnet-full.n',
    100: 'api-gnosis-mainnet.n', 130: 'api-unichain-mainnet.n', 137: 'api-polygon-mainnet-full.n', 143: 'api-monad-mainnet-full.n',
    146: 'api-sonic-mainnet-archive.n', 169: 'api-manta-pacific-archive.n', 204: 'api-opbnb-mainnet.n', 288: 'api-boba-mainnet.n',
    324: 'api-zksync-era-mainnet-full.n', 336: 'api-shiden.n', 369: 'api-pulse-mainnet.n', 480: 'api-worldchain-mainnet.n',
    545: 'api-flow-evm-gateway-testnet.n', 592: 'api-astar.n', 747: 'api-flow-evm-gateway-mainnet.n', 943: 'api-pulsechain-testnet-v4.n',
    945: 'api-bittensor-testnet.n', 964: 'api-bittensor-mainnet.n', 988: 'api-stable-mainnet.n', 996: 'api-bifrost-polkadot.n',
    999: 'api-hyperliquid-mainnet-evm.n', 1135: 'api-lisk-mainnet.n', 1284: 'api-moonbeam.n', 1285: 'api-moonriver.n', 1287: 'api-moonbase-alpha.n',
    1301: 'api-unichain-sepolia.n', 2020: 'api-ronin-mainnet.n', 2031: 'api-centrifuge.n', 3338: 'api-peaq.n', 4202: 'api-lisk-sepolia.n',
    4217: 'api-tempo-mainnet.n', 4326: 'api-megaeth-mainnet.n', 4663: 'api-robinhood-mainnet-archive.n', 4689: 'api-iotex-mainnet.n',
    5000: 'api-mantle-mainnet.n', 5003: 'api-mantle-sepolia.n', 5234: 'api-humanode.n', 5611: 'api-opbnb-testnet.n', 5845: 'api-tangle-mainnet.n',
    8453: 'api-base-mainnet-archive.n', 8880: 'api-unique.n', 10143: 'api-monad-testnet-full.n', 10200: 'api-chiado.n',
    13371: 'api-immutable-zkevm-mainnet.n', 42161: 'api-arbitrum-mainnet-archive.n', 42220: 'api-celo-mainnet-archive.n',
    43114: 'api-avalanche-mainnet-archive.n', 57073: 'api-ink-mainnet.n', 59144: 'api-linea-mainnet-archive.n', 80002: 'api-polygon-amoy.n',
    80069: 'api-berachain-bepolia.n', 80094: 'api-berachain-mainnet.n', 81457: 'api-blast-mainnet-archive.n', 84532: 'api-base-sepolia-archive.n',
    88882: 'api-chiliz-spicy.n', 212013: 'api-heima.n', 222222: 'api-hydration.n', 421614: 'api-arbitrum-sepolia.n', 534352: 'api-scroll-mainnet.n',
    7777777: 'api-zora-mainnet.n', 11155111: 'api-ethereum-sepolia.n', 11155420: 'api-optimism-sepolia.n', 999999999: 'api-zora-sepolia-archive.n' },
  /** subdomain: https://<slug>-bundler.etherspot.io/ */
  etherspot: { 1: 'ethereum', 10: 'optimism', 14: 'flare', 30: 'rootstock', 56: 'bsc', 100: 'gnosis', 122: 'fuse', 137: 'polygon', 5000: 'mantle',
    8453: 'base', 42161: 'arbitrum', 43114: 'avalanche', 59144: 'linea', 534352: 'scroll', 888888888: 'ancient8' },
  /** subdomain: https://<slug>.infura.io/v3/<apiKey> (ava-*: + /ext/bc/C/rpc) */
  infura: { 1: 'mainnet', 10: 'optimism-mainnet', 56: 'bsc-mainnet', 97: 'bsc-testnet', 137: 'polygon-mainnet', 204: 'opbnb-mainnet',
    300: 'zksync-sepolia', 324: 'zksync-mainnet', 5000: 'mantle-mainnet', 5003: 'mantle-sepolia', 5611: 'opbnb-testnet', 8453: 'base-mainnet',
    17000: 'holesky', 42161: 'arbitrum-mainnet', 42220: 'celo-mainnet', 43113: 'avalanche-fuji', 43114: 'avalanche-mainnet', 44787: 'celo-alfajores',
    59141: 'linea-sepolia', 59144: 'linea-mainnet', 80002: 'polygon-amoy', 81457: 'blast-mainnet', 84532: 'base-sepolia', 421614: 'arbitrum-sepolia',
    534351: 'scroll-sepolia', 534352: 'scroll-mainnet', 11155111: 'sepolia', 11155420: 'optimism-sepolia', 168587773: 'blast-sepolia',
    11297108099: 'palm-testnet', 11297108109: 'palm-mainnet' },
  /** subdomain: https://<slug>.llamarpc.com/<apiKey> */
  llama: { 1: 'eth', 10: 'optimism', 56: 'binance', 137: 'polygon', 8453: 'base', 42161: 'arbitrum' },
  /** subdomain: https://<slug>.api.onfinality.io/rpc?apikey=<apiKey> */
  onfinality: { 1: 'eth', 10: 'optimism', 56: 'bnb', 97: 'bnb-testnet', 100: 'gnosis', 130: 'unichain', 137: 'polygon', 146: 'sonic', 250: 'fantom',
    324: 'zksync', 1088: 'metis', 1301: 'unichain-sepolia', 2741: 'abstract', 4689: 'iotex', 5000: 'mantle', 8217: 'klaytn', 8453: 'base',
    42161: 'arbitrum', 42220: 'celo', 80002: 'polygon-amoy', 84532: 'base-sepolia', 421614: 'arbitrum-sepolia', 534352: 'scroll',
    11155111: 'eth-sepolia', 11155420: 'optimism-sepolia' },
  /** path: https://rpc.satelink.network/rpc/<slug> */
  satelink: { 137: 'polygon' },
};

/** Etherspot's testnets, served at https://testnet-rpc.etherspot.io/v1/<chainId>. */
export const ETHERSPOT_TESTNETS: ReadonlySet<number> = new Set([
  31, 114, 123, 5003, 80002, 84532, 421614, 534351, 11155111, 11155420, 28122024
]);

/** Chains Pimlico serves without a probe (eRPC's known list); others are asked with eth_chainId. */
export const PIMLICO_KNOWN_CHAINS: ReadonlySet<number> = new Set([
  1, 10, 31, 56, 97, 100, 111, 122, 123, 137, 204, 252, 335, 690, 919, 957, 1001, 1513, 1993, 2039, 3939, 4202, 5000, 7560, 7887, 7979, 8217, 8453,
  10200, 17069, 22222, 34443, 41455, 42161, 42170, 42220, 43113, 43114, 44787, 53935, 59141, 59144, 60808, 78600, 80002, 81457, 84532, 90354, 98985,
  132902, 167008, 421614, 534351, 534352, 660279, 978657, 3397901, 7777777, 11155111, 11155420, 28122024, 111557560, 161221135, 168587773, 888888888,
  999999999, 37714555429
]);
